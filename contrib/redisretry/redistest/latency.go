package redistest

import (
	"fmt"
	"net"
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
	relay
	delay time.Duration
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
	p := &LatencyProxy{delay: oneWay}
	startRelay(&p.relay, ln, target, func(client, server net.Conn) {
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	})
	return p, nil
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
