package spread_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestTLSNameIsTheHostnameNotTheAddress: the backends' certificate names
// the hostname only. Through spread every request is answered over
// HTTP/2 with the hostname as the TLS server name, on whichever address
// it went to; the same request sent straight to an address fails the
// certificate check, which is what spread must not do.
func TestTLSNameIsTheHostnameNotTheAddress(t *testing.T) {
	g := startGroup(t, spreadtest.Options{TLS: true})
	sp := newSpread(t, g)
	seen := map[string]bool{}
	for i := range 40 {
		resp, body, err := getOp(t, sp, g, fmt.Sprint(i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.ServerName != g.Host {
			t.Fatalf("request %d: %s, TLS server name %q, want HTTP/2 to %q", i, resp.Proto, resp.TLS.ServerName, g.Host)
		}
		seen[body] = true
	}
	if len(seen) < 2 {
		t.Fatalf("answers came from %v, want several addresses", seen)
	}
	direct := cleanhttp.DefaultPooledTransport()
	direct.TLSClientConfig = g.TLSConfig()
	defer direct.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/", g.Backends[0].Addr, g.Port), nil)
	if resp, err := direct.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("a request to the address itself passed the certificate check: the test proves nothing")
	}
}

// TestConnectionsBoundedByAddressesTimesPerHostLimit: with
// MaxConnsPerHost 2 on each address's Transport, 48 requests at once to
// four backends open no more than 4 × 2 connections, and reach every
// backend.
func TestConnectionsBoundedByAddressesTimesPerHostLimit(t *testing.T) {
	g := startGroup(t, spreadtest.Options{Slow: 50 * time.Millisecond})
	for _, b := range g.Backends {
		b.Set(spreadtest.Slow)
	}
	sp := newSpread(t, g)
	base := sp.New
	sp.New = func() *http.Transport {
		tr := base()
		tr.MaxConnsPerHost = 2
		return tr
	}
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var conns int64
	for _, b := range g.Backends {
		conns += b.Conns.Load()
		if b.Requests.Load() == 0 {
			t.Errorf("backend %d got no request", b.Index)
		}
	}
	if conns > 8 {
		t.Fatalf("%d connections opened, want at most 4 addresses × 2", conns)
	}
}

// TestCloseIdleConnectionsReachesEveryAddress: once every backend has a
// pooled connection, CloseIdleConnections closes them all.
func TestCloseIdleConnectionsReachesEveryAddress(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls})
			sp := newSpread(t, g)
			connectAll(t, sp, g)
			closeIdleUntilClosed(t, sp, g)
		})
	}
}

// connectAll sends requests until every backend of g has a connection
// open.
func connectAll(t *testing.T, rt http.RoundTripper, g *spreadtest.Group) {
	t.Helper()
	for i := 0; ; i++ {
		all := true
		for _, b := range g.Backends {
			all = all && b.Open.Load() > 0
		}
		if all {
			return
		}
		if i == 1000 {
			t.Fatal("1000 requests did not reach every backend")
		}
		if _, _, err := getOp(t, rt, g, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor waits until cond holds, for as long as it takes up to 10 s: a
// bound for a broken test, not a verdict on speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: not %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAddressThatLeftDNSHasItsIdleConnectionsClosed: once the refreshed
// answer no longer has an address, its idle connection is closed and no
// request goes to it; the others keep theirs.
func TestAddressThatLeftDNSHasItsIdleConnectionsClosed(t *testing.T) {
	g := startGroup(t, spreadtest.Options{TLS: true})
	fc := clockwork.NewFakeClock()
	sp := newSpread(t, g)
	sp.Clock = fc
	connectAll(t, sp, g)
	gone := g.Backends[3]
	g.Resolver.Set(g.Addrs()[:3]...)
	fc.Advance(spread.DefaultRefresh)
	if _, _, err := getOp(t, sp, g, "refresh"); err != nil {
		t.Fatal(err)
	}
	// The host's requests close it: at once when it is idle, or once its
	// last HTTP/2 stream has ended on net/http's goroutine.
	i := 0
	waitFor(t, "the connection to the address that left closed", func() bool {
		i++
		if _, _, err := getOp(t, sp, g, fmt.Sprint("wait-", i)); err != nil {
			t.Fatal(err)
		}
		return gone.Open.Load() == 0
	})
	before := gone.Requests.Load()
	for i := range 40 {
		if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := gone.Requests.Load(); got != before {
		t.Fatalf("the address that left got %d more requests", got-before)
	}
	for _, b := range g.Backends[:3] {
		if b.Open.Load() == 0 {
			t.Errorf("backend %d lost its connection", b.Index)
		}
	}
}

// TestMisdirectedIsSentAgainOnAFreshConnection: a backend answers 421 to
// each connection's first request. The request is sent again on a new
// connection to the same address and answered: two connections, two
// requests, one 200; the fresh connection is closed with the body.
func TestMisdirectedIsSentAgainOnAFreshConnection(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls})
			for _, b := range g.Backends {
				b.Set(spreadtest.Misdirected)
			}
			sp := newSpread(t, g)
			resp, _, err := getOp(t, sp, g, "1")
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			var conns, reqs int64
			for _, b := range g.Backends {
				conns += b.Conns.Load()
				reqs += b.Requests.Load()
			}
			if conns != 2 || reqs != 2 {
				t.Fatalf("%d connections, %d requests; want 2 and 2", conns, reqs)
			}
			closeIdleUntilClosed(t, sp, g)
		})
	}
}

// TestFirstLookupFailureIsAnErrorAndClosesTheBody: a host whose first
// lookup fails gets the resolver's error, wrapped, and the request's
// body is closed.
func TestFirstLookupFailureIsAnErrorAndClosesTheBody(t *testing.T) {
	g := startGroup(t, spreadtest.Options{})
	errNX := errors.New("no such host")
	g.Resolver.Fail(errNX)
	sp := newSpread(t, g)
	body := &closeCounter{}
	req, _ := http.NewRequest(http.MethodPost, g.URL, body)
	_, err := sp.RoundTrip(req)
	if !errors.Is(err, errNX) {
		t.Fatalf("err = %v, want the resolver's", err)
	}
	if body.closes != 1 {
		t.Fatalf("body closed %d times, want 1", body.closes)
	}
}

type closeCounter struct{ closes int }

func (c *closeCounter) Read([]byte) (int, error) { return 0, errors.New("not read") }
func (c *closeCounter) Close() error             { c.closes++; return nil }

// TestMisdirectedWithABodySentAgainOnlyWithGetBody: after a 421, a POST
// whose body GetBody can make again is sent again and answered; one
// whose body cannot be made again gets the 421 itself, its body closed
// once.
func TestMisdirectedWithABodySentAgainOnlyWithGetBody(t *testing.T) {
	g := startGroup(t, spreadtest.Options{})
	for _, b := range g.Backends {
		b.Set(spreadtest.Misdirected)
	}
	sp := newSpread(t, g)
	req, _ := http.NewRequest(http.MethodPost, g.URL, strings.NewReader("order"))
	resp, err := sp.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("with GetBody: status %d, want 200", resp.StatusCode)
	}
	for _, b := range g.Backends {
		b.Set(spreadtest.Misdirected) // a new connection to misdirect
	}
	body := &onceBody{r: strings.NewReader("order")}
	req, _ = http.NewRequest(http.MethodPost, g.URL, body)
	resp, err = sp.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || body.closes.Load() != 1 {
		t.Fatalf("without GetBody: status %d, body closed %d times; want 421 and 1", resp.StatusCode, body.closes.Load())
	}
}

// onceBody is a request body with no GetBody that counts its closes.
type onceBody struct {
	r      io.Reader
	closes atomic.Int64
}

func (b *onceBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *onceBody) Close() error               { b.closes.Add(1); return nil }

// closeIdleUntilClosed calls CloseIdleConnections until g has no
// connection open: an HTTP/2 connection finishes its last stream on
// net/http's goroutine after the body is closed, and is not idle before.
func closeIdleUntilClosed(t *testing.T, sp *spread.Transport, g *spreadtest.Group) {
	t.Helper()
	waitFor(t, "every connection closed", func() bool {
		sp.CloseIdleConnections()
		return g.OpenConns() == 0
	})
}
