package redistest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a Redis server that can
// lose replies after the server ran the command: it forwards a chosen
// command to the server, then closes the client's connection instead of
// forwarding the reply. The client reads EOF after its write, the one
// failure go-redis answers by sending the command again (up to its
// MaxRetries), so the server runs it twice.
//
// A command is chosen when one read from the client contains a match (as
// go-redis writes it: lower case, such as "evalsha"; "" matches every
// command): either one of the next n given to [Proxy.LoseNext], or a rate
// of them given to [Proxy.LoseRate]. It can also lose commands before
// the server sees them ([Proxy.DropNext]): a network failure that leaves
// the server's state as it was. Its methods are safe for concurrent use.
type Proxy struct {
	relay

	match    atomic.Pointer[[]byte]
	next     atomic.Int64 // commands still to lose by LoseNext
	drop     atomic.Int64 // commands still to drop by DropNext
	perMille atomic.Int64
	seed     atomic.Uint64
	seen     atomic.Uint64 // matching commands so far
	lost     atomic.Int64  // replies lost
	dropped  atomic.Int64  // commands dropped

	lostMu  sync.Mutex          // protects lostSet
	lostSet map[uint64]struct{} // hashes of the commands LoseRate lost
}

// StartProxy starts a Proxy to target for tb and closes it when tb ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := NewProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// NewProxy listens on a free loopback port and forwards every connection
// to target. It loses nothing until told to. The caller must Close it.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy: %w", err)
	}
	p := &Proxy{}
	startRelay(&p.relay, ln, target, func(client, server net.Conn) {
		doomed := &atomic.Bool{}
		p.wg.Add(2)
		go p.toServer(client, server, doomed)
		go p.toClient(client, server, doomed)
	})
	return p, nil
}

// LoseNext loses the replies of the next n commands that contain match.
func (p *Proxy) LoseNext(match string, n int) {
	m := []byte(match)
	p.match.Store(&m)
	p.next.Store(int64(n))
}

// DropNext drops the next n commands that contain match before the server
// sees them: the proxy closes the client's connection instead of
// forwarding the command, so the client reads EOF after its write (and
// go-redis sends the command again, up to its MaxRetries) while the server
// runs nothing.
func (p *Proxy) DropNext(match string, n int) {
	m := []byte(match)
	p.match.Store(&m)
	p.drop.Store(int64(n))
}

// Dropped returns how many commands the proxy has dropped.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// LoseRate loses the replies of perMille thousandths of the commands
// that contain match, drawn from seed and each command's number, so that
// a run is reproducible for a given order of commands. It never loses the
// reply to a command byte for byte the same as one it lost before (the
// client sending it again): a reply is lost at most once, so go-redis's
// retries always end, and a run measures the double deliveries rather
// than its client giving up.
func (p *Proxy) LoseRate(match string, perMille int, seed uint64) {
	m := []byte(match)
	p.match.Store(&m)
	p.seed.Store(seed)
	p.perMille.Store(int64(perMille))
}

// Lost returns how many replies the proxy has lost.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// toServer copies the client's commands to the server, marking the
// connection doomed before it forwards a command whose reply is lost.
func (p *Proxy) toServer(client, server net.Conn, doomed *atomic.Bool) {
	defer p.wg.Done()
	defer p.forget(client, server)
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 && p.dropChosen(buf[:n]) {
			p.dropped.Add(1)
			return // the deferred forget closes both: the client reads EOF
		}
		if n > 0 {
			if p.chosen(buf[:n]) {
				doomed.Store(true)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// toClient copies the server's replies to the client, except that the
// reply on a doomed connection closes both connections instead.
func (p *Proxy) toClient(client, server net.Conn, doomed *atomic.Bool) {
	defer p.wg.Done()
	defer p.forget(client, server)
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && doomed.Load() {
			p.lost.Add(1)
			return // the deferred forget closes both: the client reads EOF
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// dropChosen reports whether the command in chunk is dropped unsent.
func (p *Proxy) dropChosen(chunk []byte) bool {
	m := p.match.Load()
	if m == nil || !bytes.Contains(chunk, *m) {
		return false
	}
	for {
		left := p.drop.Load()
		if left <= 0 {
			return false
		}
		if p.drop.CompareAndSwap(left, left-1) {
			return true
		}
	}
}

// chosen reports whether the reply to the command in chunk is lost.
func (p *Proxy) chosen(chunk []byte) bool {
	m := p.match.Load()
	if m == nil || !bytes.Contains(chunk, *m) {
		return false
	}
	n := p.seen.Add(1)
	for {
		left := p.next.Load()
		if left <= 0 {
			break
		}
		if p.next.CompareAndSwap(left, left-1) {
			return true
		}
	}
	perMille := p.perMille.Load()
	if perMille <= 0 || int64(splitmix(p.seed.Load()^n)%1000) >= perMille {
		return false
	}
	h := fnv.New64a()
	h.Write(chunk)
	sum := h.Sum64()
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	if _, again := p.lostSet[sum]; again {
		return false
	}
	if p.lostSet == nil {
		p.lostSet = map[uint64]struct{}{}
	}
	p.lostSet[sum] = struct{}{}
	return true
}

// splitmix is SplitMix64's finalizer: a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
