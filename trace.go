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
type connTrace struct {
	ct    httptrace.ClientTrace
	start time.Time // when the attempt was sent

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

// withConnTrace returns ctx with a new connTrace installed, composed with
// any trace the caller installed. timings says whether to record the
// phases too, or only whether a connection was obtained.
func withConnTrace(ctx context.Context, timings bool) (context.Context, *connTrace) {
	c := &connTrace{start: time.Now()}
	c.ct.GetConn = func(string) { c.event(func() { c.asked, c.getConn = true, time.Now() }) }
	c.ct.GotConn = func(info httptrace.GotConnInfo) {
		c.event(func() { c.got, c.reused, c.gotConn = true, info.Reused, time.Now() })
	}
	if timings {
		c.ct.DNSStart = func(httptrace.DNSStartInfo) { c.stamp(&c.dnsStart, false) }
		c.ct.DNSDone = func(httptrace.DNSDoneInfo) { c.stamp(&c.dnsDone, true) }
		// Happy Eyeballs may dial several addresses: the phase runs from
		// the first start to the last end.
		c.ct.ConnectStart = func(string, string) { c.stamp(&c.connStart, false) }
		c.ct.ConnectDone = func(string, string, error) { c.stamp(&c.connDone, true) }
		c.ct.TLSHandshakeStart = func() { c.stamp(&c.tlsStart, false) }
		c.ct.TLSHandshakeDone = func(tls.ConnectionState, error) { c.stamp(&c.tlsDone, true) }
		c.ct.GotFirstResponseByte = func() { c.stamp(&c.firstByte, false) }
	}
	return httptrace.WithClientTrace(ctx, &c.ct), c
}

// event runs f under the lock unless the attempt has ended.
func (c *connTrace) event(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		f()
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

// fill copies the recorded phases into a. Call it after end.
func (c *connTrace) fill(a *Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got {
		a.Conn = ConnNew
		if c.reused {
			a.Conn = ConnReused
		}
		a.ConnWait = span(c.getConn, c.gotConn)
	}
	a.DNS = span(c.dnsStart, c.dnsDone)
	a.Connect = span(c.connStart, c.connDone)
	a.TLSHandshake = span(c.tlsStart, c.tlsDone)
	a.FirstByte = span(c.start, c.firstByte)
}

// span is the time from a to b, or 0 when either did not happen.
func span(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return b.Sub(a)
}
