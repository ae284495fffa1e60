package spread

import (
	"net"
	"testing"
	"time"
)

// closingConn is a connection whose Close takes until release is closed,
// as a connection's Close can on a loaded machine.
type closingConn struct {
	net.Conn
	entered chan struct{}
	release chan struct{}
	closed  chan struct{}
}

func (c *closingConn) Close() error {
	close(c.entered)
	<-c.release
	close(c.closed)
	return nil
}

// TestCloseAllReturnsOnlyOnceEveryConnectionIsClosed: a connection that
// net/http is closing on its own goroutine when closeAll runs is closed
// when closeAll returns, not merely gone from the set: the next dial
// may count on it.
func TestCloseAllReturnsOnlyOnceEveryConnectionIsClosed(t *testing.T) {
	var s connSet
	c := &closingConn{entered: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	tracked := s.track(c)
	go tracked.Close()
	<-c.entered
	returned := make(chan struct{})
	go func() { s.closeAll(); close(returned) }()
	select {
	case <-returned:
		t.Fatal("closeAll returned while a connection was still being closed")
	case <-time.After(50 * time.Millisecond):
	}
	close(c.release)
	<-returned
	select {
	case <-c.closed:
	default:
		t.Fatal("closeAll returned before the connection was closed")
	}
	if n := s.open(); n != 0 {
		t.Fatalf("%d connections open after closeAll, want 0", n)
	}
}
