//go:build !windows

package httpretry

// osConnErrors are the system's codes for a connection refused, reset or
// aborted, where they differ from syscall's POSIX ones: none outside
// Windows.
var osConnErrors []errorClassOf
