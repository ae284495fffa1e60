package spreadtest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Behaviour is what a backend does with each request.
type Behaviour int32

const (
	// Answer answers 200 with the backend's address as the body.
	Answer Behaviour = iota
	// Reset resets the request: over HTTP/1.1 the connection, with a
	// TCP RST; over HTTP/2 the stream, with INTERNAL_ERROR.
	Reset
	// Slow answers as Answer does after Options.Slow (or until the
	// request is canceled, when it answers nothing).
	Slow
	// Trickle answers 200 at once with the first bytes of its body, and
	// the rest after Options.Slow (or nothing more, once the request is
	// canceled).
	Trickle
	// Misdirected answers 421 Misdirected Request to every request on the
	// first connection that brings one after it is set, as a server that
	// does not serve the host on a connection coalesced to it would, and
	// as Answer on other connections.
	Misdirected
)

// Options configure [Start].
type Options struct {
	// Host is the hostname the backends serve, and the only name in the
	// certificate. If empty, "spread.test".
	Host string
	// TLS serves HTTP/2 and HTTP/1.1 over TLS; false serves HTTP/1.1 in
	// clear text.
	TLS bool
	// Slow is how long a Slow backend takes to answer. If 0, one second.
	Slow time.Duration
	// OnRequest, if not nil, is called on every request a backend
	// receives, before it acts, with the backend.
	OnRequest func(b *Backend, r *http.Request)
}

// Group is backends on several loopback addresses and one port, serving
// one hostname.
type Group struct {
	// Host is the hostname the backends serve.
	Host string
	// Port is the port every backend listens on.
	Port int
	// URL is the scheme, host and port to send requests to:
	// "https://spread.test:port" with TLS.
	URL string
	// Backends are in the order of the addresses given to Start.
	Backends []*Backend
	// Resolver answers the backends' addresses for any host.
	Resolver *Resolver
	// RootCAs trusts the certificate the backends present, with TLS.
	RootCAs *x509.CertPool

	servers []*http.Server
	wg      sync.WaitGroup
}

// Backend is one of a Group's servers.
type Backend struct {
	// Index is its position in Group.Backends.
	Index int
	// Addr is its address.
	Addr netip.Addr

	behaviour atomic.Int32
	// Requests counts the requests it received.
	Requests atomic.Int64
	// Conns counts the connections it accepted.
	Conns atomic.Int64
	// Open is how many of its connections are open now.
	Open atomic.Int64

	mu          sync.Mutex // protects misdirected
	misdirected string     // the remote address of the connection it misdirects
}

// Set changes what the backend does from its next request on.
func (b *Backend) Set(v Behaviour) {
	b.mu.Lock()
	b.misdirected = ""
	b.mu.Unlock()
	b.behaviour.Store(int32(v))
}

// Start starts one backend on each of addrs, all on one free port. Close
// the Group when done.
func Start(addrs []netip.Addr, opt Options) (*Group, error) {
	if opt.Host == "" {
		opt.Host = "spread.test"
	}
	if opt.Slow <= 0 {
		opt.Slow = time.Second
	}
	g := &Group{Host: opt.Host, Resolver: NewResolver(addrs...)}
	var cert tls.Certificate
	if opt.TLS {
		var err error
		if cert, g.RootCAs, err = certificates(opt.Host); err != nil {
			return nil, err
		}
	}
	lns, err := listenAll(addrs)
	if err != nil {
		return nil, err
	}
	g.Port = lns[0].Addr().(*net.TCPAddr).Port
	scheme := "http"
	if opt.TLS {
		scheme = "https"
	}
	g.URL = scheme + "://" + net.JoinHostPort(opt.Host, strconv.Itoa(g.Port))
	for i, ln := range lns {
		b := &Backend{Index: i, Addr: addrs[i]}
		g.Backends = append(g.Backends, b)
		srv := &http.Server{
			Handler:   b.handler(opt),
			ConnState: b.connState,
			ErrorLog:  log.New(io.Discard, "", 0),
		}
		if opt.TLS {
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
			ln = tls.NewListener(ln, srv.TLSConfig)
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetHTTP1(true)
			srv.Protocols.SetHTTP2(true)
		}
		g.servers = append(g.servers, srv)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			srv.Serve(ln)
		}()
	}
	return g, nil
}

// listenAll listens on one port free on every address of addrs.
func listenAll(addrs []netip.Addr) ([]net.Listener, error) {
	if len(addrs) == 0 {
		return nil, errors.New("spreadtest: no address")
	}
	var lastErr error
	for range 20 {
		first, err := net.Listen("tcp", netip.AddrPortFrom(addrs[0], 0).String())
		if err != nil {
			return nil, fmt.Errorf("spreadtest: listen on %s: %w", addrs[0], err)
		}
		port := uint16(first.Addr().(*net.TCPAddr).Port)
		lns := []net.Listener{first}
		for _, a := range addrs[1:] {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
			if err != nil {
				lastErr = err
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(addrs) {
			return lns, nil
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	return nil, fmt.Errorf("spreadtest: no port free on every address: %w", lastErr)
}

// Close stops every backend, closing its connections, and waits for them.
func (g *Group) Close() {
	for _, s := range g.servers {
		s.Close()
	}
	g.wg.Wait()
}

// Kill stops backend i as a process that died would: its listener and
// its connections close, and a connection to its address is refused.
func (g *Group) Kill(i int) { g.servers[i].Close() }

// Addrs is the backends' addresses.
func (g *Group) Addrs() []netip.Addr {
	out := make([]netip.Addr, len(g.Backends))
	for i, b := range g.Backends {
		out[i] = b.Addr
	}
	return out
}

// TLSConfig is a client configuration that trusts the backends'
// certificate (and only it); it names no server: the client checks the
// certificate against the URL's host.
func (g *Group) TLSConfig() *tls.Config { return &tls.Config{RootCAs: g.RootCAs} }

// OpenConns is the number of connections open to all the backends.
func (g *Group) OpenConns() int64 {
	var n int64
	for _, b := range g.Backends {
		n += b.Open.Load()
	}
	return n
}

func (b *Backend) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		b.Conns.Add(1)
		b.Open.Add(1)
	case http.StateHijacked, http.StateClosed:
		b.Open.Add(-1)
	}
}

func (b *Backend) handler(opt Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.Requests.Add(1)
		if opt.OnRequest != nil {
			opt.OnRequest(b, r)
		}
		switch Behaviour(b.behaviour.Load()) {
		case Reset:
			reset(w, r)
			return
		case Slow:
			select {
			case <-time.After(opt.Slow):
			case <-r.Context().Done():
				return
			}
		case Trickle:
			io.WriteString(w, b.Addr.String())
			w.(http.Flusher).Flush()
			select {
			case <-time.After(opt.Slow):
			case <-r.Context().Done():
				return
			}
		case Misdirected:
			if b.misdirects(r) {
				w.WriteHeader(http.StatusMisdirectedRequest)
				return
			}
		}
		io.WriteString(w, b.Addr.String())
	})
}

// misdirects reports whether r came on the connection the backend
// misdirects: the first that brought a request since Misdirected was set.
func (b *Backend) misdirects(r *http.Request) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.misdirected == "" {
		b.misdirected = r.RemoteAddr
	}
	return b.misdirected == r.RemoteAddr
}

// reset ends the request without an answer: over HTTP/1.1 it hijacks the
// connection and closes it with a TCP RST (SO_LINGER 0); over HTTP/2 it
// aborts the handler, which resets the stream.
func reset(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0)
				}
				c.Close()
				return
			}
		}
	}
	panic(http.ErrAbortHandler)
}
