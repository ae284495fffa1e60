package redistest

import (
	"net"
	"sync"
)

// relay is what the proxies share: a listener on a free loopback port
// that dials target for each connection it accepts and hands the pair to
// serve, and the set of open connections, which Close closes before it
// waits for every goroutine the relay and serve started (serve's own
// goroutines count themselves in wg).
type relay struct {
	target string
	ln     net.Listener
	serve  func(client, server net.Conn)

	mu     sync.Mutex // protects conns and closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startRelay starts accepting on ln: ln is listening already.
func startRelay(r *relay, ln net.Listener, target string, serve func(client, server net.Conn)) {
	r.target, r.ln, r.serve, r.conns = target, ln, serve, map[net.Conn]struct{}{}
	r.wg.Add(1)
	go r.accept()
}

// Addr returns the proxy's host:port, on 127.0.0.1.
func (r *relay) Addr() string { return r.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (r *relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", r.target)
		if err != nil {
			client.Close()
			continue
		}
		if !r.track(client, server) {
			return
		}
		r.serve(client, server)
	}
}

// track registers a connection pair for Close; it reports false, having
// closed them, once the proxy is closed.
func (r *relay) track(conns ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		r.conns[c] = struct{}{}
	}
	return true
}

// forget closes conns and drops them from the set.
func (r *relay) forget(conns ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(r.conns, c)
	}
}
