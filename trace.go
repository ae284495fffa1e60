package httpretry

import (
	"context"
	"crypto/tls"
	"net/http/httptrace"
	"sync"
	"time"
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
// their hooks built once. A dial that outlives its attempt may still send
// events into a trace reused by a later attempt; fill therefore counts the
// connection phases only for a new connection, and only within the time
// that attempt waited for it.
type connTrace struct {
	full   httptrace.ClientTrace // every hook: for OnAttempt with DialTrace
	timed  httptrace.ClientTrace // all but DNS and connect: for OnAttempt
	light  httptrace.ClientTrace // GetConn and GotConn: the proof that nothing was sent
	start  time.Time             // when the attempt was sent
	pooled bool                  // from connTraces, hooks never composed

	mu        sync.Mutex // protects the fields below
	done      bool       // the attempt has ended: ignore later events
	asked     bool       // GetConn: the request asked for a connection
	got       bool       // GotConn: it had one, and may have been sent
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
		}
		c.mu.Unlock()
	}
	c.timed = c.light
	c.timed.TLSHandshakeStart = func() { c.stamp(&c.tlsStart, false) }
	c.timed.TLSHandshakeDone = func(tls.ConnectionState, error) { c.stamp(&c.tlsDone, true) }
	c.timed.GotFirstResponseByte = func() { c.stamp(&c.firstByte, false) }
	// The DNS and connect hooks are the ones that make
	// httptrace.WithClientTrace allocate a second trace and four more
	// values per attempt, so they are installed only when asked for.
	c.full = c.timed
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
	traceTimed                    // and the connection wait, TLS and first byte
	traceDialed                   // and the DNS and connect phases
)

// withConnTrace returns ctx with a connTrace installed, recording what
// level asks for. A trace the caller installed is kept: net/http then
// calls both, and the pooled hooks are not used, since composing would
// change them for good.
func withConnTrace(ctx context.Context, level traceLevel) (context.Context, *connTrace) {
	var c *connTrace
	if httptrace.ContextClientTrace(ctx) != nil {
		c = newConnTrace()
	} else {
		c = connTraces.Get().(*connTrace)
		c.pooled = true
	}
	c.reset()
	switch level {
	case traceDialed:
		return httptrace.WithClientTrace(ctx, &c.full), c
	case traceTimed:
		return httptrace.WithClientTrace(ctx, &c.timed), c
	}
	return httptrace.WithClientTrace(ctx, &c.light), c
}

// reset readies c for a new attempt, sent now.
func (c *connTrace) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.start = time.Now()
	c.done, c.asked, c.got, c.reused = false, false, false, false
	c.getConn, c.gotConn, c.firstByte = time.Time{}, time.Time{}, time.Time{}
	c.dnsStart, c.dnsDone, c.connStart, c.connDone = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	c.tlsStart, c.tlsDone = time.Time{}, time.Time{}
}

// release returns c to the pool once its attempt is reported. A trace
// composed with the caller's is not pooled.
func (c *connTrace) release() {
	if c.pooled {
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
// a connection: it asked for one and had none when it ended, so not a
// byte of the request was written.
func (c *connTrace) end() (unsent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	return c.asked && !c.got
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
