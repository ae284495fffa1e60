package redistest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// LatencyProxy is a TCP proxy on 127.0.0.1 in front of a Redis server that
// delays every byte by a fixed time in each direction, as a server in
// another zone or region would be: a round trip takes at least twice the
// delay, and calls sent together stay together (each chunk read is
// delivered its delay after it was read, whatever came before it), so the
// proxy adds latency without limiting throughput. Its methods are safe for
// concurrent use.
type LatencyProxy struct {
	target string
	delay  time.Duration
	ln     net.Listener

	mu     sync.Mutex // protects conns and closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartLatencyProxy starts a LatencyProxy to target that delays each
// direction by oneWay, for tb, and closes it when tb ends.
func StartLatencyProxy(tb testing.TB, target string, oneWay time.Duration) *LatencyProxy {
	tb.Helper()
	p, err := NewLatencyProxy(target, oneWay)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// NewLatencyProxy listens on a free loopback port and forwards every
// connection to target, each direction delayed by oneWay. The caller must
// Close it.
func NewLatencyProxy(target string, oneWay time.Duration) (*LatencyProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: latency proxy: %w", err)
	}
	p := &LatencyProxy{target: target, delay: oneWay, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port, on 127.0.0.1.
func (p *LatencyProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *LatencyProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *LatencyProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// track registers a connection pair for Close; it reports false, having
// closed them, once the proxy is closed.
func (p *LatencyProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *LatencyProxy) forget(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

// chunk is bytes read from one side, due at the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies from src to dst, each chunk delayed by p.delay from when it
// was read. When src ends, what it sent is still delivered, then both
// connections are closed; when dst fails, both are closed at once.
func (p *LatencyProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	queue := make(chan chunk, 1024)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer p.forget(src, dst)
		for c := range queue {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := dst.Write(c.b); err != nil {
				p.forget(src, dst) // the reader's Read fails now
				for range queue {  // and the reader finishes
				}
				return
			}
		}
	}()
	defer close(queue)
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{b: buf[:n], due: time.Now().Add(p.delay)}
		}
		if err != nil {
			return
		}
	}
}
