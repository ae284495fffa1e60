//go:build !unix

package httpretry

import "net"

// closedAddr returns a loopback address where nothing listens: a
// listener's port, closed. Connections to it are refused (unless another
// server takes the port first; see closedaddr_unix_test.go).
func closedAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
