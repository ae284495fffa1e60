//go:build !mutation

package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// This file judges a fault-matrix cell by docs/rules.md's rules, on the facts
// its recorder saw. Real sockets decide races the test cannot control (a
// reset may land before or after the headers; an attempt may run out of
// time on a busy machine), so a cell never predicts which way they went:
// it checks that what happened is something docs/rules.md allows for what
// the attempts met. The time left at a decision is known only within
// bounds on the real clock, and so is whether an attempt that never had a
// connection left the client: each attempt is described twice, at the
// bounds most favourable to a retry and at those most favourable to a
// stop. A row of docs/rules.md's table "surely" holds when it holds in the
// first, and "maybe" holds when it holds in the second.

// fmFacts is what one attempt met, at both bounds.
type fmFacts struct {
	// forRetry is at the bounds most favourable to a retry: the most
	// time left (the Transport decided as soon as the attempt ended), and
	// an attempt that never had a connection without a dial error (a
	// time limit during the dial) taken as provably unsent, though the
	// Transport may not be able to tell.
	forRetry rulesFacts
	// forStop is at the bounds most favourable to a stop: the least time
	// left (it decided just before RoundTrip returned), and only a dial
	// error taken as proof that nothing was sent.
	forStop rulesFacts
}

// fmAllowed returns the stops docs/rules.md's table allows after an attempt
// that met f: walking the rows in order, each that may hold, up to the
// first that surely holds. mustStop reports whether one surely held; when
// none did, a retry was allowed too.
func fmAllowed(f fmFacts) (allowed []StopReason, mustStop bool) {
	for _, s := range rulesStops {
		if s.when(f.forRetry) {
			return append(allowed, s.reason), true
		}
		if s.when(f.forStop) {
			allowed = append(allowed, s.reason)
		}
	}
	return allowed, false
}

// facts reads what attempt k (from 0) met from the recorder and the
// OnAttempt hook. A cell's caller never cancels and sets no deadline of
// its own, and its budget is Unlimited.
func (c fmCell) facts(r fmResult, k int) fmFacts {
	call, a := r.calls[k], r.attempts[k]
	first := r.calls[0].start
	f := rulesFacts{
		n:             k + 1,
		maxAttempts:   fmMaxAttempts,
		failed:        a.Err != nil,
		backoff:       rulesWindow(fmBaseDelay, fmMaxDelay, k), // fmJitter draws the whole window
		hasDeadline:   true,
		minAttempt:    fmMinAttemptTime,
		maxRetryAfter: fmMaxRetryAfter,
		tokens:        rulesUnlimited,
	}
	neverLeft := !call.leftClient()
	var op *net.OpError
	dialError := f.failed && errors.As(a.Err, &op) && op.Op == "dial"
	// A body is rewindable when it has GetBody or was buffered, or when
	// the attempt never read it (as the recorder saw it).
	f.rewindable = c.method.body != fmOnce || dialError || !call.readBody()
	if f.failed {
		f.transient = IsTransient(nil, a.Err)
		f.repeatable = c.method.idempotent() || dialError
	} else {
		f.transient = rulesTransientResponse(a.Status, call.header, c.method.key)
		f.repeatable = c.method.idempotent() || rulesVouches(a.Status, call.header)
		if rulesHonoursRetryAfter(a.Status) {
			f.serverDelay, f.hasServerDelay = ParseRetryAfter(call.header, call.end)
		}
	}
	forRetry, forStop := f, f
	forRetry.left = fmTimeout - call.end.Sub(first)
	forStop.left = fmTimeout - r.returned
	if f.failed {
		forRetry.repeatable = f.repeatable || neverLeft
	}
	forRetry.rewindable = f.rewindable || neverLeft
	return fmFacts{forRetry: forRetry, forStop: forStop}
}

// checkRules judges the attempts and the reason: after every attempt the
// Transport retried, no row surely held and the wait is docs/rules.md's;
// after the last, the reason is one the table allows.
func (c fmCell) checkRules(r fmResult, fail func(string, ...any)) {
	last := len(r.attempts) - 1
	for k, a := range r.attempts {
		f := c.facts(r, k)
		allowed, mustStop := fmAllowed(f)
		retried := k < last || a.Wait > 0
		if retried {
			if mustStop {
				fail("after attempt %d (%s) the oracle's %s holds (rulesStops, rules_oracle_test.go); the Transport went on to wait %v", k+1, fmMet(r, k), allowed[len(allowed)-1], a.Wait)
			}
			c.checkWait(r, k, f, fail)
		}
		if k < last {
			continue
		}
		if retried {
			// The Transport decided to retry and then stopped in the
			// wait: only a wake-up with less than MinAttemptTime left
			// does that when the caller never cancels.
			allowed = []StopReason{DeadlineExhausted}
		}
		if !slices.Contains(allowed, r.outcome.Reason) {
			fail("after the last attempt (%s) the oracle (rulesStops, rules_oracle_test.go) allows %v; the Transport stopped with %s", fmMet(r, k), allowed, r.outcome.Reason)
		}
	}
}

// checkWait checks the wait after attempt k: "the wait is Jitter(window)"
// (fmJitter draws it whole); after a valid Retry-After of S, between S and
// S + Jitter(window); never so long that MinAttemptTime would not be left;
// and the next attempt did not start before it was over.
func (c fmCell) checkWait(r fmResult, k int, facts fmFacts, fail func(string, ...any)) {
	w, f := r.attempts[k].Wait, facts.forRetry
	switch {
	case f.hasServerDelay && (w < f.serverDelay || w > f.serverDelay+f.backoff):
		fail("after attempt %d waited %v; want Retry-After %v up to %v more", k+1, w, f.serverDelay, f.backoff)
	case !f.hasServerDelay && w != f.backoff:
		fail("after attempt %d waited %v; want Jitter(window) = %v", k+1, w, f.backoff)
	}
	if w+f.minAttempt > f.left {
		fail("after attempt %d planned a wait of %v with at most %v left: MinAttemptTime %v does not fit", k+1, w, f.left, f.minAttempt)
	}
	if k+1 < len(r.calls) {
		if gap := r.calls[k+1].start.Sub(r.calls[k].end); gap < w {
			fail("attempt %d started %v after attempt %d ended; its wait was %v", k+2, gap, k+1, w)
		}
	}
}

// fmMet describes what attempt k met, for failure messages.
func fmMet(r fmResult, k int) string {
	a, call := r.attempts[k], r.calls[k]
	if a.Err != nil {
		return fmt.Sprintf("error %v, left the client %v", a.Err, call.leftClient())
	}
	return fmt.Sprintf("status %d, Retry-After %q", a.Status, call.header.Get("Retry-After"))
}

// checkKeyless checks that a POST without a key went again only after an
// attempt that never left the client, or an error response whose server
// said another attempt is safe; and that the server received it no more
// often than that allows.
func (c fmCell) checkKeyless(r fmResult, fail func(string, ...any)) {
	if c.method.idempotent() {
		return
	}
	allowed := 1
	for k := 1; k < len(r.calls); k++ {
		prev, a := r.calls[k-1], r.attempts[k-1]
		vouched := a.Err == nil && rulesVouches(a.Status, prev.header)
		if vouched {
			allowed++
		}
		if prev.leftClient() && !vouched {
			fail("POST without a key sent again (attempt %d) after %s", k+1, fmMet(r, k-1))
		}
	}
	if r.keyless > allowed {
		fail("a POST without a key reached the server %d times; docs/rules.md allows %d", r.keyless, allowed)
	}
}

// checkResult checks what RoundTrip returned: the last attempt's response
// with a nil error when it produced one that ended the operation, else a
// *Error with the Outcome's reason, which matches ErrOutcomeUnknown only
// for a request not safe to repeat whose last attempt failed after it may
// have been sent.
func (c fmCell) checkResult(r fmResult, fail func(string, ...any)) {
	last := len(r.attempts) - 1
	a, call := r.attempts[last], r.calls[last]
	if r.outcome.Status != a.Status {
		fail("Outcome.Status %d; the last attempt's was %d", r.outcome.Status, a.Status)
	}
	if a.Err == nil && a.Wait == 0 {
		switch {
		case r.err != nil || !r.resp:
			fail("err = %v; want the last attempt's %d response", r.err, a.Status)
		case r.status != a.Status:
			fail("status %d; the last attempt's was %d", r.status, a.Status)
		}
		if want := map[string]int{"h1": 1, "h2": 2}[c.proto]; r.resp && r.proto != want {
			fail("response over HTTP/%d; want HTTP/%d", r.proto, want)
		}
		c.checkReturnedBody(r, fail)
		return
	}
	var e *Error
	switch {
	case r.resp:
		fail("got a %d response; the last attempt produced none (%s)", r.status, fmMet(r, last))
	case !errors.As(r.err, &e):
		fail("err = %v; want *Error", r.err)
	case e.Reason != r.outcome.Reason:
		fail("Error.Reason %s; Outcome.Reason %s", e.Reason, r.outcome.Reason)
	}
	// Unknown when it may have been sent; not when it surely was not. An
	// attempt that never had a connection, though not for a dial error,
	// may go either way.
	f := c.facts(r, last).forStop
	maybe := !c.method.idempotent() && f.failed && !f.repeatable
	surely := maybe && call.leftClient()
	if got := errors.Is(r.err, ErrOutcomeUnknown); got && !maybe || !got && surely {
		fail("errors.Is(err, ErrOutcomeUnknown) = %v for %s %s", got, c.method.name, fmMet(r, last))
	}
}

// checkReturnedBody checks reading the returned body: one that breaks off
// reaches the caller as a read error, unless the attempt read it whole
// (BufferResponse, for a request safe to repeat); any other body reads
// without error, unless a time limit (AttemptTimeout or Timeout, which
// bound reading the returned body) ended the reading.
func (c fmCell) checkReturnedBody(r fmResult, fail func(string, ...any)) {
	buffered := c.buffer && c.method.idempotent() && c.method.body != fmOnce
	switch {
	case c.fault.breaks && !buffered && r.readErr == nil:
		fail("reading the returned body succeeded; the server broke it off")
	case (!c.fault.breaks || buffered) && r.readErr != nil && !errors.Is(r.readErr, context.DeadlineExceeded):
		fail("reading the returned body: %v; want it whole, or cut by a time limit", r.readErr)
	}
}

// checkBodies checks what was sent and what was discarded: every attempt
// the server answered had sent the whole body; every response the
// Transport did not return was drained (read, unless too long to be
// worth it) and closed by the time RoundTrip returned, and the one it
// returned was not read (unless BufferResponse read it); an
// HTTP/1 attempt made after the last one's connection went back to the
// pool (its response drained) reused it; and over HTTP/2, where attempts
// share a connection, a failed stream did not cost it.
func (c fmCell) checkBodies(r fmResult, fail func(string, ...any)) {
	// The server reads a request's body before it acts, so each attempt
	// answered with a response delivered a whole body; an attempt its
	// time limit cut short may have delivered part of one, never another.
	want, whole, answered := fmPayloadFor(c.method), 0, 0
	for i, body := range r.bodies {
		if !strings.HasPrefix(want, body) {
			fail("request %d reached the server with body %q; want %q", i+1, body, want)
		}
		if body == want {
			whole++
		}
	}
	for _, call := range r.calls {
		if call.err == nil {
			answered++
		}
	}
	if whole < answered {
		fail("%d requests reached the server with the whole body %q; %d attempts were answered", whole, want, answered)
	}
	everyLeft := true
	for k, call := range r.calls {
		everyLeft = everyLeft && call.leftClient()
		if k > 0 && c.proto == "h1" && call.leftClient() && !call.reusedConn() {
			if at, ok := r.calls[k-1].pooled(); ok && at.Before(call.start) {
				fail("attempt %d dialed a new connection; attempt %d's was back in the pool", k+1, k)
			}
		}
		if call.body == nil {
			continue
		}
		st := r.atReturn[k]
		if r.resp && k == len(r.calls)-1 {
			if buffered := c.buffer && c.method.idempotent() && c.method.body != fmOnce; !buffered && st.read {
				fail("the returned response's body was read before RoundTrip returned")
			}
			continue
		}
		switch {
		case !st.closed:
			fail("the response of attempt %d was not closed when RoundTrip returned", k+1)
		case !st.read && call.body.length <= drainLimit:
			fail("the response of attempt %d (Content-Length %d) was closed unread; a short body is drained", k+1, call.body.length)
		case st.read && call.body.length > drainLimit && !c.buffer:
			fail("the response of attempt %d (Content-Length %d) was read; a body too long to drain is closed", k+1, call.body.length)
		}
	}
	if c.proto == "h2" && r.hits > 0 && everyLeft && r.newConns != 1 {
		fail("%d HTTP/2 connections; want 1: a failed stream must not cost the connection", r.newConns)
	}
}

// fmPayloadFor is the body every request of m must reach the server with.
func fmPayloadFor(m fmMethod) string {
	if m.body == fmNoBody {
		return ""
	}
	return fmPayload
}
