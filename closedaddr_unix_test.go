//go:build unix

package httpretry

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
)

// closedAddr returns a loopback address where nothing listens, and where
// nothing can start listening while the tests run: the port of a socket
// bound and never listened on, held open until the test binary exits (a
// handful per run). Connections to it are refused. A listener's port
// closed again, as on other systems, may be taken at once by any server
// starting on the machine, which would then answer the "refused"
// requests.
func closedAddr() (string, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "", err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)), nil
}

// TestClosedAddrCannotBeTaken: no server can start listening on
// closedAddr's port, as one starting anywhere on the machine might take a
// port merely closed, and connections to it are refused.
func TestClosedAddrCannotBeTaken(t *testing.T) {
	t.Parallel()
	addr, err := closedAddr()
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("a server could listen on %s, closedAddr's address", addr)
	}
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		conn.Close()
		t.Fatalf("a connection to %s was accepted; want it refused", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v; want connection refused", addr, err)
	}
}
