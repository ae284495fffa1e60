package httpretry

// osConnErrors are the system's codes for a connection refused, reset or
// aborted: on Windows, Winsock's.
var osConnErrors = winsockConnErrors[:]
