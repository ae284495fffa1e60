package spread

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/internal/tried"
)

// Defaults for the zero values of Transport's fields.
const (
	DefaultRefresh     = 30 * time.Second
	DefaultEjectAfter  = 5
	DefaultEjectFor    = 30 * time.Second
	DefaultMaxEjectFor = 300 * time.Second
	DefaultMaxEjected  = 0.5
)

// Errors a request can end with before it reaches an address.
var (
	// ErrNoAddresses: the host resolved to no address.
	ErrNoAddresses = errors.New("spread: the host resolved to no address")
	// ErrDialTLS: New returned a Transport that dials TLS itself
	// (DialTLSContext or DialTLS), which cannot be pointed at an address.
	ErrDialTLS = errors.New("spread: New returned a Transport with DialTLSContext or DialTLS set")
	// ErrSharedTransport: New returned a Transport it had returned before;
	// each address needs one of its own.
	ErrSharedTransport = errors.New("spread: New returned a Transport already in use")
)

// Resolver looks up a host's addresses. *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// marker makes the Transport ask httpretry.Transport for the addresses
// an operation's earlier attempts were sent to; it adds no exported name.
//
//lint:ignore U1000 embedded for its method, which tried.Wants asks for
type marker = tried.Marker

// Transport is an [http.RoundTripper] that sends each request to one of
// the addresses its host resolves to, over a pooled *http.Transport of
// that address's own, while the request keeps its URL and Host.
//
// A first attempt goes to the one of two addresses drawn at random that
// has fewer requests in flight; a retry or a hedge of an httpretry
// operation goes to an address the operation has not tried while one is
// left, and to any once all were tried. An address that fails EjectAfter
// times in a row (a connection error, a deadline before the response's
// headers, a stall cut by httpretry's IdleTimeout, a body that breaks
// off, or a 5xx that signals overload: 503, 529, or a 5xx with
// "X-Should-Retry: false") is ejected: no attempt goes to it while
// another address can take it. A success restores it. What a caller
// alone causes counts neither way: a 429, a canceled attempt (with or
// without a cause), a request refused before it asked for a connection,
// a body cut by the request's deadline. A 421 Misdirected Request is
// sent once more to the same address on a fresh connection, when the
// request's body can be sent again, one such resend at a time per
// address.
//
// The zero value is ready to use: cleanhttp's pooled Transport per
// address, the system resolver, answers refreshed every 30 seconds. A
// Transport is safe for simultaneous use by multiple goroutines; like
// *http.Transport it should be reused, not made per request.
//
// A host given as an IP address is not resolved: its requests go to that
// address. Requests sent through a proxy (the Transport from New has a
// Proxy that returns one, as cleanhttp's does when HTTP_PROXY or
// HTTPS_PROXY is set) are neither resolved nor spread: they go through
// one Transport per host to the proxy, which resolves the host and
// chooses the address.
type Transport struct {
	//lint:ignore U1000 embedded for its method, which tried.Wants asks for
	marker

	// New returns a new *http.Transport for one address, on every call:
	// TLS settings, proxies, timeouts and connection limits are its.
	// The Transport sets its DialContext to one that dials the address,
	// around New's own DialContext if it set one; it must not set
	// DialTLSContext or DialTLS. Connection limits apply per address:
	// MaxConnsPerHost bounds the connections to each address, so a host
	// has at most its number of addresses times that. If nil,
	// cleanhttp.DefaultPooledTransport.
	New func() *http.Transport

	// Resolver looks up each host's addresses. If nil, net.DefaultResolver.
	Resolver Resolver

	// Refresh is how long a host's addresses are used before they are
	// looked up again: Go's resolver does not report DNS TTLs, so set it
	// at or below the records' TTL. A connection error asks for a lookup
	// sooner, at most one a second per host; a failed lookup keeps the
	// addresses already known. A request that finds the addresses due
	// starts a lookup on a goroutine of its own, at most one per host at
	// a time and each bounded to 30 seconds, and goes on with the
	// addresses known; only a host with none known waits for the lookup,
	// each request until its own context ends. If 0, DefaultRefresh
	// (30 s).
	Refresh time.Duration

	// EjectAfter is the number of failures in a row that ejects an
	// address. If 0, DefaultEjectAfter (5); if negative, no address is
	// ejected.
	EjectAfter int

	// EjectFor is the length of an address's first ejection; each
	// further ejection without a success in between is one more
	// EjectFor, up to MaxEjectFor. If 0, DefaultEjectFor (30 s).
	EjectFor time.Duration

	// MaxEjectFor is the longest an ejection lasts. If 0,
	// DefaultMaxEjectFor (300 s).
	MaxEjectFor time.Duration

	// MaxEjected is the share of a host's addresses that may be ejected
	// at once, rounded down, but at least one of two or more, and never
	// all: one address is never ejected. If 0, DefaultMaxEjected (0.5).
	MaxEjected float64

	// Clock is the time source for refreshes and ejections. If nil, the
	// real clock.
	Clock clockwork.Clock

	// intn draws an integer from [0, n) for the power of two choices; nil
	// is math/rand/v2's IntN. Tests set it.
	intn func(int) int

	mu    sync.Mutex       // protects hosts; taken before any host's
	hosts map[string]*host // by the URL's host and port

	ownMu sync.Mutex               // protects owned; taken last
	owned map[*http.Transport]bool // the Transports of the known addresses
}

func (t *Transport) clock() clockwork.Clock {
	if t.Clock == nil {
		return clockwork.NewRealClock()
	}
	return t.Clock
}

func (t *Transport) resolver() Resolver {
	if t.Resolver == nil {
		return net.DefaultResolver
	}
	return t.Resolver
}

func (t *Transport) refresh() time.Duration {
	if t.Refresh <= 0 {
		return DefaultRefresh
	}
	return t.Refresh
}

func (t *Transport) rand(n int) int {
	if t.intn != nil {
		return t.intn(n)
	}
	return rand.IntN(n)
}

// ejectRule resolves the ejection settings' zero values.
func (t *Transport) ejectRule() ejectRule {
	r := ejectRule{after: t.EjectAfter, base: t.EjectFor, max: t.MaxEjectFor, share: t.MaxEjected}
	if r.after == 0 {
		r.after = DefaultEjectAfter
	}
	if r.base <= 0 {
		r.base = DefaultEjectFor
	}
	if r.max <= 0 {
		r.max = DefaultMaxEjectFor
	}
	r.max = max(r.max, r.base)
	if r.share <= 0 {
		r.share = DefaultMaxEjected
	}
	return r
}

// RoundTrip sends req to one of its host's addresses. It implements
// [http.RoundTripper]; req's body is closed on every path.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("spread: nil Request.URL")
	}
	h, a, viaProxy, err := t.route(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if viaProxy != nil {
		return viaProxy.RoundTrip(req)
	}
	sent, trace := withConnTrace(req)
	resp, err := a.rt.RoundTrip(sent)
	if err == nil && resp.StatusCode == http.StatusMisdirectedRequest {
		resp, err = t.misdirected(h, a, sent, resp)
	}
	v := judgeAnswer(resp, err, trace.asked.Load(), endingOf(sent.Context()))
	if v == failure {
		h.recordFailure(a, err != nil)
	}
	if err != nil {
		h.release(a)
		return nil, err
	}
	return h.track(a, resp, v == success), nil
}

// route returns where req goes: its host's Transport to a proxy, or an
// address chosen for it and counted in flight. A host the table forgot
// between the request's look at the table and its choice is looked up in
// the table again: only the table's has its connections reached by
// CloseIdleConnections. A host just made is not forgotten before Refresh
// has passed, so this ends.
func (t *Transport) route(req *http.Request) (*host, *addr, *http.Transport, error) {
	for {
		h := t.host(req.URL)
		viaProxy, err := h.proxied(req)
		if err == nil && viaProxy != nil {
			return h, nil, viaProxy, nil
		}
		var a *addr
		if err == nil {
			a, err = h.choose(req.Context(), tried.From(req.Context()))
		}
		if !errors.Is(err, errHostForgotten) {
			return h, a, nil, err
		}
	}
}

// CloseIdleConnections closes the idle connections of every address's
// Transport, those of addresses that left their host's answer included.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	hosts := make([]*host, 0, len(t.hosts))
	for _, h := range t.hosts {
		hosts = append(hosts, h)
	}
	t.mu.Unlock()
	for _, h := range hosts {
		h.closeIdle()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
