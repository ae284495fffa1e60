package spread

import (
	"net"
	"sync"
)

// connSet is the connections one address's Transport dialed that are
// still open, so that those of an address forgotten can be closed even
// if its Transport did not count them idle yet (an HTTP/2 connection
// finishes its last stream on net/http's goroutine after the response
// body is closed). Dials add to it from net/http's goroutines.
type connSet struct {
	mu    sync.Mutex // protects conns
	conns map[*trackedConn]struct{}
}

// track returns c, recorded in s until it is closed.
func (s *connSet) track(c net.Conn) net.Conn {
	t := &trackedConn{Conn: c, set: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[*trackedConn]struct{})
	}
	s.conns[t] = struct{}{}
	return t
}

// closeAll closes every connection still open. Call it only once no
// request of the address is in flight.
func (s *connSet) closeAll() {
	s.mu.Lock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// open is the number of connections still open.
func (s *connSet) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// trackedConn is a connection that leaves its set once it is closed. It
// is closed before it leaves, and a Close that finds another under way
// waits for it: a connection gone from the set is closed, so closeAll
// returns only when every connection is (net/http may be closing one on
// its own goroutine at the time).
type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		err = c.Conn.Close()
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return err
}
