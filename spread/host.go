package spread

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/httpretry/httpretry/internal/tried"
)

// minLookupGap is the shortest time between two lookups of a host's
// addresses while some are known: a burst of connection errors asks for
// one lookup, not one per error.
const minLookupGap = time.Second

// lookupTimeout bounds one lookup of a host's addresses. No request
// waits for it past the request's own context; it bounds how long the
// lookup's goroutine can outlive the requests that started it.
const lookupTimeout = 30 * time.Second

// maxIdleHosts is how many hosts the Transport keeps before it forgets
// those with nothing in flight that were not used for Refresh.
const maxIdleHosts = 1024

// addr is one of a host's addresses and its Transport.
type addr struct {
	ip       netip.Addr
	hostport string          // what is dialed, and what the operation's tried set records
	rt       *http.Transport // made at its first attempt
	conns    connSet         // the connections rt dialed, still open
	inFlight int             // attempts sent whose response body is not yet closed
	health   health
	retired  bool          // it left the host's answer
	resend   chan struct{} // held by the resend after a 421 on its fresh connection
}

// host is what the Transport knows of one host and port: its addresses
// and their health. Its fields are guarded by mu.
type host struct {
	t       *Transport
	name    string // the URL's hostname, lower case
	port    string
	key     string // name:port, as net/http dials it
	literal bool   // name is an IP address: never looked up

	mu         sync.Mutex
	addrs      []*addr // the last answer, in address order
	retired    []*addr // addresses that left the answer: kept to the next lookup, or while attempts to them run
	resolvedAt time.Time
	lastLookup time.Time
	stale      bool            // a connection error asks for a lookup
	lookup     *lookupCall     // the lookup in flight, or nil
	viaProxy   *http.Transport // for the requests New's Transport sends through a proxy, made at first use
	noProxy    bool            // New's Transport has no Proxy: nothing goes through one
	lastUsed   time.Time
	forgotten  bool // the Transport's table let go of it: a request holding it takes the table's
}

// errHostForgotten: the host's state was let go of by the Transport's
// table after the request got it; the request takes the table's.
var errHostForgotten = errors.New("spread: host forgotten")

// host returns the state of u's host and port, made at first use.
func (t *Transport) host(u *url.URL) *host {
	name := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	key := net.JoinHostPort(name, port)
	now := t.clock().Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.hosts[key]; ok {
		return h
	}
	if t.hosts == nil {
		t.hosts = make(map[string]*host)
	}
	if len(t.hosts) >= maxIdleHosts {
		t.forgetIdleLocked(now)
	}
	// Made in use: it is not forgotten before its first request chose.
	h := &host{t: t, name: name, port: port, key: key, lastUsed: now}
	if ip, err := netip.ParseAddr(name); err == nil {
		h.literal = true
		h.update([]netip.Addr{ip})
	}
	t.hosts[key] = h
	return h
}

// forgetIdleLocked forgets the hosts with nothing in flight that were
// not used for Refresh, closing their idle connections. t.mu is held.
func (t *Transport) forgetIdleLocked(now time.Time) {
	for key, h := range t.hosts {
		if h.idleSince(now, t.refresh()) {
			h.closeIdle()
			h.mu.Lock()
			for _, a := range slices.Concat(h.addrs, h.retired) {
				h.forget(a)
			}
			t.disown(h.viaProxy)
			h.forgotten = true
			h.mu.Unlock()
			delete(t.hosts, key)
		}
	}
}

// idleSince reports whether h has nothing in flight and was last used
// more than d before now.
func (h *host) idleSince(now time.Time, d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.lastUsed) <= d {
		return false
	}
	for _, a := range slices.Concat(h.addrs, h.retired) {
		if a.inFlight > 0 {
			return false
		}
	}
	return true
}

// choose looks the host up when its addresses are due, picks the address
// for an attempt, records it in the operation's set, and counts it in
// flight. The caller must release it.
func (h *host) choose(ctx context.Context, set *tried.Set) (*addr, error) {
	if err := h.resolve(ctx); err != nil {
		return nil, err
	}
	now := h.t.clock().Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.forgotten {
		return nil, errHostForgotten
	}
	h.lastUsed = now
	h.sweepRetired()
	cs := make([]choice, len(h.addrs))
	for i, a := range h.addrs {
		cs[i] = choice{tried: set != nil && set.Has(a.hostport), ejected: a.health.ejected(now), inFlight: a.inFlight}
	}
	i := pick(cs, h.t.rand)
	if i < 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoAddresses, h.name)
	}
	a := h.addrs[i]
	if a.rt == nil {
		rt, err := h.t.addrTransport(h.key, a.hostport, true, &a.conns)
		if err != nil {
			return nil, err
		}
		a.rt = rt
	}
	a.inFlight++
	if set != nil {
		set.Add(a.hostport)
	}
	return a, nil
}

// due reports whether the host's addresses should be looked up at now,
// and whether any are known. h.mu is held.
func (h *host) due(now time.Time) (due, known bool) {
	known = len(h.addrs) > 0
	if h.literal {
		return false, known
	}
	if !known {
		return true, false
	}
	return now.Sub(h.lastLookup) >= minLookupGap && (h.stale || now.Sub(h.resolvedAt) >= h.t.refresh()), true
}

// lookupCall is one lookup of a host's addresses, which the requests that
// find them due share.
type lookupCall struct {
	done chan struct{} // closed once the lookup has ended
	err  error         // why it failed, set before done is closed
}

// resolve starts a lookup of the host when its addresses are due and
// none is in flight. The lookup runs on a goroutine of its own, bounded
// by lookupTimeout, so that no request waits for it past its own
// context, whatever the resolver does with the context: while some
// addresses are known, every request goes on with them at once, and a
// failed lookup keeps them; with none known, a request waits for the
// lookup or its context, and the lookup's error is returned when it
// fails.
func (h *host) resolve(ctx context.Context) error {
	now := h.t.clock().Now()
	h.mu.Lock()
	due, known := h.due(now)
	if !due {
		h.mu.Unlock()
		return nil
	}
	call := h.lookup
	if call == nil {
		call = &lookupCall{done: make(chan struct{})}
		h.lookup = call
		// The lookup serves every request that waits for it: one
		// request's end does not end it.
		go h.lookUp(context.WithoutCancel(ctx), call)
	}
	h.mu.Unlock()
	if known {
		return nil
	}
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return fmt.Errorf("spread: look up %s: %w", h.name, ctx.Err())
	}
}

// lookUp looks the host up for call and makes the answer its addresses.
func (h *host) lookUp(ctx context.Context, call *lookupCall) {
	defer close(call.done)
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	ips, err := h.t.resolver().LookupNetIP(ctx, "ip", h.name)
	now := h.t.clock().Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lookup, h.lastLookup = nil, now
	if err == nil && len(ips) == 0 {
		err = ErrNoAddresses
	}
	if err != nil {
		call.err = fmt.Errorf("spread: look up %s: %w", h.name, err)
		return
	}
	h.resolvedAt, h.stale = now, false
	h.update(ips)
}

// update makes ips the host's addresses. An address already known keeps
// its Transport and health; one that left the answer has its idle
// connections closed, and is kept, retired, until its attempts in flight
// end. h.mu is held (or h is not yet shared).
func (h *host) update(ips []netip.Addr) {
	port, _ := netip.ParseAddrPort(net.JoinHostPort("0.0.0.0", h.port))
	next := make([]*addr, 0, len(ips))
	for _, ip := range ips {
		ip = ip.Unmap()
		if slices.ContainsFunc(next, func(a *addr) bool { return a.ip == ip }) {
			continue
		}
		a := h.find(ip)
		if a == nil {
			a = &addr{ip: ip, hostport: netip.AddrPortFrom(ip, port.Port()).String(), resend: make(chan struct{}, 1)}
		}
		a.retired = false
		next = append(next, a)
	}
	slices.SortFunc(next, func(a, b *addr) int { return a.ip.Compare(b.ip) })
	// An address already retired with nothing in flight has had its
	// connections closed since the last lookup: it is forgotten. One that
	// leaves now is kept until the next, its idle connections closed.
	var retired []*addr
	for _, a := range slices.Concat(h.addrs, h.retired) {
		if slices.Contains(next, a) {
			continue
		}
		if a.rt != nil {
			a.rt.CloseIdleConnections()
		}
		if a.retired && a.inFlight == 0 {
			h.forget(a)
			continue
		}
		a.retired = true
		retired = append(retired, a)
	}
	h.addrs, h.retired = next, retired
}

// forget lets go of a, an address with nothing in flight that its host
// no longer keeps: its connections are closed, idle or not (the last
// streams have ended), and its Transport is disowned. h.mu is held.
func (h *host) forget(a *addr) {
	a.conns.closeAll()
	h.t.disown(a.rt)
}

// find returns the known address ip, current or retired, or nil.
func (h *host) find(ip netip.Addr) *addr {
	for _, a := range slices.Concat(h.addrs, h.retired) {
		if a.ip == ip {
			return a
		}
	}
	return nil
}

// recordSuccess restores a, whatever its failures.
func (h *host) recordSuccess(a *addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a.health = h.t.ejectRule().succeeded(a.health)
}

// recordFailure counts a failure of a, which ejects it after enough in a
// row; a failed connection (conn) also asks for a fresh lookup of the
// host's addresses.
func (h *host) recordFailure(a *addr, conn bool) {
	now := h.t.clock().Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if conn {
		h.stale = true
	}
	ejected := 0
	for _, b := range h.addrs {
		if b != a && b.health.ejected(now) {
			ejected++
		}
	}
	a.health = h.t.ejectRule().failed(a.health, now, ejected, len(h.addrs))
}

// release ends an attempt's time in flight: its response body was closed
// or read to its end, or it ended in an error. The last attempt of a
// retired address closes its Transport's idle connections: over HTTP/1.1
// its connection is closed as soon as it is idle; an HTTP/2 connection
// may still be finishing its stream, and sweepRetired closes it later.
func (h *host) release(a *addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a.inFlight--
	if a.retired && a.inFlight == 0 {
		a.rt.CloseIdleConnections()
	}
}

// sweepRetired closes the idle connections of the retired addresses with
// nothing in flight: each request to the host does, until the next lookup
// forgets them. h.mu is held.
func (h *host) sweepRetired() {
	for _, a := range h.retired {
		if a.inFlight == 0 && a.rt != nil {
			a.rt.CloseIdleConnections()
		}
	}
}

// closeIdle closes the idle connections of every address's Transport,
// and of the one for requests through a proxy.
func (h *host) closeIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.viaProxy != nil {
		h.viaProxy.CloseIdleConnections()
	}
	for _, a := range slices.Concat(h.addrs, h.retired) {
		if a.rt != nil {
			a.rt.CloseIdleConnections()
		}
	}
}

// hostports is the host's addresses as dialed, for tests.
func (h *host) hostports() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.addrs))
	for i, a := range h.addrs {
		out[i] = a.hostport
	}
	return out
}
