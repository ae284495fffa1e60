package pgtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// Fate is what a Proxy does with a COMMIT.
type Fate int

// The fates of a COMMIT.
const (
	// Deliver forwards the COMMIT and its answer.
	Deliver Fate = iota
	// LoseAnswer forwards the COMMIT, waits for the server's answer (the
	// transaction is then committed, or not, by the server's word), and
	// closes the connection without passing it on: the client's
	// acknowledgement is lost.
	LoseAnswer
	// LoseCommit closes the connection before the COMMIT reaches the
	// server: the server rolls the transaction back.
	LoseCommit
	// Hold keeps the COMMIT, and the connection, until the client gives
	// up and closes it, as a paused server or a network partition does;
	// then the server's side closes too, and it rolls the transaction
	// back.
	Hold
)

// Proxy is a TCP proxy in front of a PostgreSQL server that reads the
// protocol's message frames, to lose the acknowledgement of a COMMIT, or
// the COMMIT itself, or to reset a connection between two messages.
type Proxy struct {
	// Port is the proxy's loopback port.
	Port int
	// Commit, if set, decides the fate of each COMMIT (a simple query
	// "commit", as pgx sends it). It is called on the connection's
	// goroutine and must be safe for concurrent use.
	Commit func() Fate
	// Reset, if set, is called once per connection: a positive n resets
	// the connection (closes both sides at once) before its n-th
	// statement (a Query or Parse message); 0 never.
	Reset func() int

	// LostAnswers, LostCommits, Held and Resets count what the proxy
	// did.
	LostAnswers, LostCommits, Held, Resets atomic.Int64

	target string
	ln     net.Listener
	mu     sync.Mutex // protects conns
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// StartProxy starts a Proxy to target (host:port) on a free loopback
// port. Set Commit and Reset before the first connection.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Port: ln.Addr().(*net.TCPAddr).Port, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(1)
		go p.serve(c, s)
	}
}

// track registers a connection pair, unless the proxy is closing.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
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

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

// conn is one client connection and its server connection.
type conn struct {
	client, server net.Conn
	// swallow, once set, makes the server-to-client copy drop what
	// follows and close both at the next ReadyForQuery: the answer to a
	// COMMIT whose acknowledgement is lost.
	swallow atomic.Bool
}

func (p *Proxy) serve(client, server net.Conn) {
	defer p.wg.Done()
	c := &conn{client: client, server: server}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.backend(c)
		p.untrack(client, server)
	}()
	p.frontend(c)
	p.untrack(client, server)
	<-done
}

// frontend copies the client's messages to the server, one frame at a
// time.
func (p *Proxy) frontend(c *conn) {
	r := bufio.NewReader(c.client)
	startup, err := readStartup(r)
	if err != nil || write(c.server, startup) != nil {
		return
	}
	resetAt := 0
	if p.Reset != nil {
		resetAt = p.Reset()
	}
	statements := 0
	for {
		typ, msg, err := readFrame(r)
		if err != nil {
			return
		}
		if typ == 'Q' || typ == 'P' {
			statements++
			if statements == resetAt {
				p.Resets.Add(1)
				return
			}
		}
		if typ == 'Q' && isCommit(msg) && !p.commit(c, r) {
			return
		}
		if write(c.server, msg) != nil {
			return
		}
	}
}

// commit applies the fate of a COMMIT the client sent, and reports
// whether to forward it.
func (p *Proxy) commit(c *conn, r *bufio.Reader) bool {
	if p.Commit == nil {
		return true
	}
	switch p.Commit() {
	case LoseCommit:
		p.LostCommits.Add(1)
		return false
	case LoseAnswer:
		p.LostAnswers.Add(1)
		c.swallow.Store(true)
	case Hold:
		p.Held.Add(1)
		_, _ = io.Copy(io.Discard, r) // until the client closes
		return false
	}
	return true
}

// backend copies the server's messages to the client, and drops the
// answer of a COMMIT whose acknowledgement is lost.
func (p *Proxy) backend(c *conn) {
	r := bufio.NewReader(c.server)
	for {
		typ, msg, err := readFrame(r)
		if err != nil {
			return
		}
		if c.swallow.Load() {
			if typ == 'Z' {
				return // the server answered the COMMIT; the client never hears it
			}
			continue
		}
		if write(c.client, msg) != nil {
			return
		}
	}
}

// isCommit reports whether a Query message's text is COMMIT.
func isCommit(msg []byte) bool {
	q := strings.TrimRight(string(msg[5:]), "\x00; \n")
	return strings.EqualFold(strings.TrimSpace(q), "commit")
}

// readStartup reads the first message of a connection, which has no type
// byte.
func readStartup(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 4 || n > 1<<20 {
		return nil, errors.New("pgtest: bad startup message")
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readFrame reads one message: its type byte, its length and its body,
// returned whole.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("pgtest: bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[5:])
	return hdr[0], msg, err
}

func write(c net.Conn, b []byte) error {
	_, err := c.Write(b)
	return err
}
