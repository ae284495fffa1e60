package httpretry

import (
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// TestWindowsConnectionErrorsAreTransient: on Windows a refused, reset,
// aborted or timed-out connection carries a Winsock code, which
// syscall.ECONNREFUSED and its kin do not match; they are transient all
// the same, with the ErrorClass of their POSIX counterparts. The test installs the Windows
// table on any platform (classify_windows_test.go dials for real on
// Windows), so it must not run in parallel.
func TestWindowsConnectionErrorsAreTransient(t *testing.T) {
	saved := osConnErrors
	osConnErrors = winsockConnErrors[:]
	t.Cleanup(func() { osConnErrors = saved })
	tests := []struct {
		name  string
		err   error
		class string
	}{
		{"WSAECONNREFUSED dialing", winOpError("dial", "connectex", winErrWSAECONNREFUSED), "connection_refused"},
		{"ERROR_CONNECTION_REFUSED dialing", winOpError("dial", "connectex", winErrConnectionRefused), "connection_refused"},
		{"WSAECONNRESET reading", winOpError("read", "wsarecv", winErrWSAECONNRESET), "connection_reset"},
		{"WSAECONNABORTED writing", winOpError("write", "wsasend", winErrWSAECONNABORTED), "connection_reset"},
		{"WSAENETRESET reading", winOpError("read", "wsarecv", winErrWSAENETRESET), "connection_reset"},
		{"ERROR_NETNAME_DELETED reading", winOpError("read", "wsarecv", winErrNetnameDeleted), "connection_reset"},
		{"ERROR_CONNECTION_ABORTED reading", winOpError("read", "wsarecv", winErrConnectionAborted), "connection_reset"},
		{"WSAESHUTDOWN writing", winOpError("write", "wsasend", winErrWSAESHUTDOWN), "broken_pipe"},
		// ETIMEDOUT is a network timeout on other systems (its Errno's
		// Timeout is true); Windows's is a Winsock code whose is not.
		{"WSAETIMEDOUT dialing", winOpError("dial", "connectex", winErrWSAETIMEDOUT), "timeout"},
		{"WSAETIMEDOUT reading", winOpError("read", "wsarecv", winErrWSAETIMEDOUT), "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As http.Client returns it.
			err := &url.Error{Op: "Get", URL: "http://api.test/", Err: tt.err}
			if !IsTransient(nil, err) {
				t.Errorf("IsTransient(%v) = false; want true", err)
			}
			if got := ErrorClass(err); got != tt.class {
				t.Errorf("ErrorClass(%v) = %q; want %q", err, got, tt.class)
			}
		})
	}
	// Other Winsock codes stay unknown, and so final.
	if err := winOpError("read", "wsarecv", syscall.Errno(10013)); IsTransient(nil, err) { // WSAEACCES
		t.Errorf("IsTransient(%v) = true; want an unknown code final", err)
	}
}

// winOpError builds a socket error as Windows's net package returns it.
func winOpError(op, call string, code syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(call, code)}
}
