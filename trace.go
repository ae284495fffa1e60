package httpretry

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// This file follows an attempt's connection through net/http/httptrace,
// for two reasons. A request that is not safe to repeat needs proof that
// an attempt which failed never got a connection: then nothing was sent,
// and the attempt can be made again like a failed dial. And an OnAttempt
// hook is told where the attempt's time went: waiting for a connection,
// DNS, connecting, the TLS handshake, the first response byte. Neither is
// paid for by an idempotent request that nothing observes.

// connTrace records one attempt's connection events. net/http calls its
// hooks from several goroutines, some of them (a dial that outlives its
// request) after the attempt has ended, so every field is guarded and
// events after done are ignored.
//
// Building a trace costs an allocation per hook, so traces are pooled with
// their hooks built once, but only while no late callback can reach them.
// GetConn and GotConn run on the request's goroutine, within its RoundTrip;
// the dial hooks (DNS, connect, TLS) run on net/http's dial goroutine,
// which outlives a canceled request and may even start after it, so a
// trace that asked net/http for a connection with those hooks installed
// is never reused: its late events would land in another attempt's
// report. fill also counts the connection phases only for a new
// connection, and only within the time that attempt waited for it.
type connTrace struct {
	full   httptrace.ClientTrace // every hook: for OnAttempt with DialTrace
	timed  httptrace.ClientTrace // GetConn, GotConn and the first byte: for OnAttempt
	light  httptrace.ClientTrace // GetConn and GotConn: the proof that nothing was sent
	start  time.Time             // when the attempt was sent
	pooled bool                  // from connTraces, hooks never composed
	dials  bool                  // the dial hooks (DNS, connect, TLS) are installed: full

	// With Propagate, the attempt's own header, whose TimeoutHeader is
	// rewritten when the connection is obtained and again as the request
	// starts to be written: the time spent waiting for the connection,
	// and then (HTTP/2) for a stream on it, is time the caller no longer
	// has. nil otherwise.
	attemptHeader http.Header
	limit         time.Time // the attempt's limit, on clock
	clock         clockwork.Clock

	mu        sync.Mutex // protects the fields below
	gen       uint64     // counts the attempts c has served: a hook of an earlier one is stale
	done      bool       // the attempt has ended: ignore later events
	asked     bool       // GetConn: the request asked for a connection
	got       bool       // GotConn: it had one, and may have been sent
	writing   bool       // the first header field of this send was written
	reused    bool
	getConn   time.Time
	gotConn   time.Time
	dnsStart  time.Time
	dnsDone   time.Time
	connStart time.Time
	connDone  time.Time
	tlsStart  time.Time
	tlsDone   time.Time
	firstByte time.Time
}

// connTraces holds idle connTraces, hooks built.
var connTraces = sync.Pool{New: func() any { return newConnTrace() }}

func newConnTrace() *connTrace {
	c := &connTrace{}
	c.light.GetConn = func(string) {
		now := time.Now()
		c.mu.Lock()
		if !c.done {
			c.asked, c.getConn = true, now
		}
		c.mu.Unlock()
	}
	c.light.GotConn = func(info httptrace.GotConnInfo) {
		now := time.Now()
		c.mu.Lock()
		if !c.done {
			c.got, c.reused, c.gotConn = true, info.Reused, now
			c.writing = false
			c.setTimeoutLocked()
		}
		c.mu.Unlock()
	}
	c.timed = c.light
	c.timed.GotFirstResponseByte = func() { c.stamp(&c.firstByte, false) }
	// The dial hooks (DNS, connect, TLS) run on net/http's dial
	// goroutine, which may outlive the attempt: a trace that installs
	// them is not reused once it asked for a connection, and they make
	// httptrace.WithClientTrace allocate a second trace and four more
	// values per attempt, so they are installed only when asked for.
	c.full = c.timed
	c.full.TLSHandshakeStart = func() { c.stamp(&c.tlsStart, false) }
	c.full.TLSHandshakeDone = func(tls.ConnectionState, error) { c.stamp(&c.tlsDone, true) }
	c.full.DNSStart = func(httptrace.DNSStartInfo) { c.stamp(&c.dnsStart, false) }
	c.full.DNSDone = func(httptrace.DNSDoneInfo) { c.stamp(&c.dnsDone, true) }
	// Happy Eyeballs may dial several addresses: the phase runs from the
	// first start to the last end.
	c.full.ConnectStart = func(string, string) { c.stamp(&c.connStart, false) }
	c.full.ConnectDone = func(string, string, error) { c.stamp(&c.connDone, true) }
	return c
}

// How much of an attempt's connection withConnTrace records.
type traceLevel int

const (
	traceConn   traceLevel = iota // only whether a connection was obtained
	traceTimed                    // and the connection wait and first byte
	traceDialed                   // and the DNS, connect and TLS phases
)

// withConnTrace returns ctx with a connTrace installed, recording what
// level asks for; writes says whether to rewrite TimeoutHeader as the
// request is written (see propagateAt). A trace the caller installed is
// kept: net/http then calls both, and the pooled hooks are not used, since
// composing would change them for good.
func withConnTrace(ctx context.Context, level traceLevel, writes bool) (context.Context, *connTrace) {
	var c *connTrace
	if httptrace.ContextClientTrace(ctx) != nil {
		c = newConnTrace()
	} else {
		c = connTraces.Get().(*connTrace)
		c.pooled = true
	}
	c.reset()
	c.dials = level == traceDialed
	hooks := &c.light
	switch level {
	case traceDialed:
		hooks = &c.full
	case traceTimed:
		hooks = &c.timed
	}
	if writes {
		hooks = c.withWroteHeaderField(hooks)
	}
	return httptrace.WithClientTrace(ctx, hooks), c
}

// withWroteHeaderField returns a copy of hooks that also rewrites the
// attempt's TimeoutHeader when the request's first header field is
// written. net/http writes the Host header (HTTP/1.1) or the :authority
// pseudo-header (HTTP/2) before any field of the request's Header: that
// is the last moment the time left can be set, once the request has its
// connection and, over HTTP/2, its stream.
//
// The hook runs on the goroutine that writes the request, which an
// HTTP/2 attempt that ended does not wait for: it carries the attempt's
// generation, so that once c serves another attempt a late call is
// ignored. (The copy and the hook are this attempt's own: two
// allocations, only with Propagate and a bound.)
func (c *connTrace) withWroteHeaderField(hooks *httptrace.ClientTrace) *httptrace.ClientTrace {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	h := new(httptrace.ClientTrace)
	*h = *hooks
	h.WroteHeaderField = func(string, []string) {
		c.mu.Lock()
		if c.gen == gen && !c.done && !c.writing {
			c.writing = true
			c.setTimeoutLocked()
		}
		c.mu.Unlock()
	}
	return h
}

// reset readies c for a new attempt, sent now.
func (c *connTrace) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.start = time.Now()
	c.gen++
	c.done, c.asked, c.got, c.reused, c.writing = false, false, false, false, false
	c.getConn, c.gotConn, c.firstByte = time.Time{}, time.Time{}, time.Time{}
	c.dnsStart, c.dnsDone, c.connStart, c.connDone = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	c.tlsStart, c.tlsDone = time.Time{}, time.Time{}
	c.attemptHeader, c.limit, c.clock = nil, time.Time{}, nil
}

// propagateAt makes the attempt's TimeoutHeader, in header, say the time
// left until limit when the request is written, not when it was made: it
// is set again when the attempt gets its connection and, when the trace
// was made with writes, when the request's first header field is written.
func (c *connTrace) propagateAt(header http.Header, limit time.Time, clock clockwork.Clock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attemptHeader, c.limit, c.clock = header, limit, clock
}

// setTimeoutLocked sets the attempt's TimeoutHeader to the time left now,
// under c.mu.
func (c *connTrace) setTimeoutLocked() {
	if c.attemptHeader != nil {
		c.attemptHeader.Set(TimeoutHeader, timeoutValue(c.limit.Sub(c.clock.Now())))
	}
}

// release returns c to the pool once its attempt is reported, unless a
// callback may still reach it: a trace with the dial hooks whose request
// asked for a connection may have started a dial that reports later. (A
// late WroteHeaderField is told apart by its generation.) A trace
// composed with the caller's is not pooled either.
func (c *connTrace) release() {
	c.mu.Lock()
	reachable := c.dials && c.asked
	c.mu.Unlock()
	if c.pooled && !reachable {
		connTraces.Put(c)
	}
}

// stamp records the time now in *t: the first time when last is false,
// the last time when it is true.
func (c *connTrace) stamp(t *time.Time, last bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done && (last || t.IsZero()) {
		*t = now
	}
}

// end stops recording and reports whether the attempt provably never got
// a connection (unsent: it asked for one and had none when it ended, so
// not a byte of the request was written), and whether it got one (got:
// the request may have been sent, whatever happened after).
func (c *connTrace) end() (unsent, got bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	return c.asked && !c.got, c.got
}

// fill copies the recorded phases into a. Call it after end. Dial
// phases count only for a new connection, and only inside the time the
// attempt waited for it.
func (c *connTrace) fill(a *Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.got {
		return
	}
	a.Conn = ConnReused
	a.ConnWait = span(c.getConn, c.gotConn, c.getConn, c.gotConn)
	if !c.reused {
		a.Conn = ConnNew
		a.DNS = span(c.dnsStart, c.dnsDone, c.getConn, c.gotConn)
		a.Connect = span(c.connStart, c.connDone, c.getConn, c.gotConn)
		a.TLSHandshake = span(c.tlsStart, c.tlsDone, c.getConn, c.gotConn)
	}
	if !c.firstByte.Before(c.gotConn) {
		a.FirstByte = c.firstByte.Sub(c.start)
	}
}

// span is the time from a to b, or 0 when either did not happen or falls
// outside [from, to].
func span(a, b, from, to time.Time) time.Duration {
	if a.IsZero() || b.IsZero() || b.Before(a) || a.Before(from) || b.After(to) {
		return 0
	}
	return b.Sub(a)
}
