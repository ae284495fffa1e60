package httpretry

import "syscall"

// Winsock and Win32 error codes (winerror.h) that a connection refused,
// reset, aborted or timed out carries on Windows. There, net's errors wrap
// these codes, and syscall.ECONNREFUSED and its kin are codes of their own
// that no socket returns, so errors.Is never matches them; nor is
// WSAETIMEDOUT a timeout to its Errno's Timeout method, as ETIMEDOUT is
// elsewhere. The codes are
// declared for every platform, so that their table can be tested
// anywhere; only Windows uses it (classify_windows.go).
const (
	winErrNetnameDeleted    syscall.Errno = 64    // ERROR_NETNAME_DELETED: the peer reset an overlapped read
	winErrConnectionRefused syscall.Errno = 1225  // ERROR_CONNECTION_REFUSED
	winErrConnectionAborted syscall.Errno = 1236  // ERROR_CONNECTION_ABORTED
	winErrWSAENETRESET      syscall.Errno = 10052 // WSAENETRESET
	winErrWSAECONNABORTED   syscall.Errno = 10053 // WSAECONNABORTED
	winErrWSAECONNRESET     syscall.Errno = 10054 // WSAECONNRESET
	winErrWSAESHUTDOWN      syscall.Errno = 10058 // WSAESHUTDOWN: sending on a connection already shut down
	winErrWSAETIMEDOUT      syscall.Errno = 10060 // WSAETIMEDOUT: the system gave up on a connect or a send
	winErrWSAECONNREFUSED   syscall.Errno = 10061 // WSAECONNREFUSED
)

// winsockConnErrors maps Windows's connection errors to the ErrorClass
// words of their POSIX counterparts: refused, reset (aborted and reset
// alike, as for ECONNABORTED), broken pipe, and timeout (ETIMEDOUT, a
// network timeout on other systems).
var winsockConnErrors = [...]errorClassOf{
	{winErrWSAECONNREFUSED, "connection_refused"},
	{winErrConnectionRefused, "connection_refused"},
	{winErrWSAECONNRESET, "connection_reset"},
	{winErrWSAECONNABORTED, "connection_reset"},
	{winErrWSAENETRESET, "connection_reset"},
	{winErrNetnameDeleted, "connection_reset"},
	{winErrConnectionAborted, "connection_reset"},
	{winErrWSAESHUTDOWN, "broken_pipe"},
	{winErrWSAETIMEDOUT, "timeout"},
}
