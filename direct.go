package httpretry

import (
	"context"
	"net/http"
	"time"

	"github.com/httpretry/httpretry/internal/latency"
	"github.com/httpretry/httpretry/internal/overload"
	"github.com/httpretry/httpretry/internal/tried"
	"github.com/httpretry/httpretry/throttle"
)

// This file holds the first attempt of an operation that needs nothing
// around it: the caller's request itself, sent to Base on the caller's
// goroutine, only when the Transport sets no hook or limit that must see
// it (Transport.direct). When IsTransient calls its answer final,
// RoundTrip returns it at once; otherwise the operation's loop
// (operation.go) takes the answer over as its first attempt's, as if it
// had sent it.

// direct reports whether t leaves the first attempt of its operations as
// it is. None of these is set: a learned attempt limit, a time limit
// (Timeout, AttemptTimeout, IdleTimeout), Propagate, BufferResponse, or a
// hook that sees an attempt (OnAttemptStart, OnAttempt, OnDone) or judges
// a request or an answer (Idempotent, Transient). Nothing then needs the
// clock, a derived context or a copy of the request, unless the request
// does (sendsDirect), or a Throttle whose destination is not idle does
// (firstAttempt.idleDest). The Key hooks of the Throttle and of Hedging,
// which name a destination, run once per operation either way. With
// Hedging, the first attempt gets a context of its own and the hedge
// timer (firstAttempt.sendHedged). The test
// TestDirectIsEverySettingThatLeavesTheFirstAttemptAsItIs sorts every
// field of Transport.
func (t *Transport) direct() bool {
	return t.LearnAttemptTimeout == nil &&
		t.Timeout <= 0 && t.AttemptTimeout <= 0 && t.IdleTimeout <= 0 && !t.Propagate &&
		t.OnAttemptStart == nil && t.OnAttempt == nil && t.OnDone == nil &&
		t.Transient == nil && t.Idempotent == nil && t.BufferResponse <= 0
}

// sendsDirect reports whether req, made with ctx, can be sent as it is as
// the first attempt of an operation of a direct Transport: it has no body
// to track or rewind, it is safe to repeat (no connection trace must
// prove it unsent), nothing asks for clock readings (a deadline) or an
// Outcome, no tried set of an outer operation waits for its address, and,
// when the operation may retry (retries), Base needs neither the context
// that marks retries as owned nor a tried set of its own (plainBase).
func sendsDirect(req *http.Request, ctx context.Context, base http.RoundTripper, retries bool) bool {
	if (retries && !plainBase(base)) || hasBody(req) || !IsIdempotent(req) {
		return false
	}
	if outcomeFrom(ctx) != nil || tried.From(ctx) != nil {
		return false
	}
	_, ok := ctx.Deadline()
	return !ok
}

// plainBase reports whether the attempts of an operation that may send
// more than one through rt need neither the context that marks retries
// as owned (marksOwnership) nor a tried set (tried.Wants).
func plainBase(rt http.RoundTripper) bool {
	return !marksOwnership(rt) && !tried.Wants(rt)
}

// firstAttempt is what an operation's first attempt, sent directly,
// produced (normalised: exactly one of resp and err is set, a resp has a
// Body) and how long it took, and what was looked up for it once for the
// operation: the destination's state in the Throttle, when one is set,
// and, with Hedging (hedgingSettled), the latencies and the hedging
// state, nil when the operation is not hedged.
type firstAttempt struct {
	sent           bool
	resp           *http.Response
	err            error
	elapsed        time.Duration
	dest           *throttle.Dest
	hedgingSettled bool
	dist           *latency.Dist
	h              *hedged
}

// idleDest looks the destination of req up in t's Throttle, if any, and
// reports whether the first attempt may be sent directly: only to an idle
// destination; admitting it to another takes the operation's loop.
func (f *firstAttempt) idleDest(t *Transport, req *http.Request) bool {
	if t.Throttle == nil {
		return true
	}
	f.dest = t.Throttle.Dest(req)
	return f.dest.Idle()
}

// record tells t's Throttle, if any, how the first attempt, sent at sent
// and answered resp, went: a served answer (overload.Served) through the
// Throttle's success path when it takes it, without a Result.
func (f *firstAttempt) record(t *Transport, resp *http.Response, sent time.Time) {
	if t.Throttle == nil {
		return
	}
	var clock throttle.Clock // nil: the system clock
	if t.Clock != nil {
		clock = t.Clock
	}
	if overload.Served(resp.StatusCode) && t.Throttle.Served(f.dest, resp.StatusCode, resp.Header, clock) {
		return
	}
	r := throttle.Result{Sent: sent}
	answer(&r, resp, nil, t.clock())
	t.Throttle.Record(f.dest, &r, clock)
}

// send sends req to base as the operation's first attempt, when the
// Throttle admits it directly. It deposits into the budget first, unless
// an outer layer owns retries (owned). It returns the answer, and true,
// when IsTransient calls it final, after telling the Throttle how it went;
// otherwise the loop takes it over (adopt).
func (f *firstAttempt) send(t *Transport, req *http.Request, base http.RoundTripper, owned bool) (*http.Response, bool) {
	if !f.idleDest(t, req) {
		return nil, false
	}
	if !owned {
		t.budgetFor(req).Deposit()
	}
	resp, err := base.RoundTrip(req)
	resp, err = normalize(base, req, resp, err)
	if err == nil && !IsTransient(resp, nil) {
		f.record(t, resp, time.Time{})
		return resp, true
	}
	f.sent, f.resp, f.err = true, resp, err
	return nil, false
}

// leavesFirstDirect reports whether the first attempt of a hedged
// operation may be sent directly: its losers are not left to finish (the
// first attempt then runs on a goroutine of its own), and a hedge's own
// Base, if any, is plain (plainBase).
func (h *Hedging) leavesFirstDirect() bool {
	return h.FinishLosers <= 0 && (h.Base == nil || plainBase(h.Base))
}

// sendHedged sends req to base as the first attempt of a hedged
// operation, when it may be sent directly (an outer layer that owns
// retries, owned, leaves nothing to hedge): on its own context, on the
// caller's goroutine, with the hedge delay armed. An answer before the
// hedge delay that IsTransient calls final is returned with true, its
// latency learned and the Throttle told; another goes to the loop (run).
// When the hedge fires first, the goroutine the hedge delay rang on sets
// the operation up and runs the loop (fired), and this goroutine hands
// the attempt over once it ends and returns the loop's verdict, with
// true.
func (f *firstAttempt) sendHedged(t *Transport, req *http.Request, base http.RoundTripper, owned bool) (*http.Response, error, bool) {
	hg := t.Hedging
	if owned || t.maxAttempts() < 2 || !hg.leavesFirstDirect() || !f.idleDest(t, req) {
		return nil, nil, false
	}
	f.hedgingSettled, f.dist = true, t.latencyDist(req)
	delay, ok := hg.plan(f.dist, req, true, bodyNone)
	if !ok {
		return nil, nil, false
	}
	t.budgetFor(req).Deposit()
	h := newHedged(hg, delay)
	f.h = h
	clock := t.clock()
	start, since := t.startClock(clock)
	sent, c := withLazyCancel(req)
	a := &h.first
	a.number, a.req, a.start, a.cancelAttempt = 1, sent, start, c
	h.deferred = deferredSetUp{t: t, req: req, base: base, dest: f.dest, dist: f.dist, since: since}
	h.launched = start
	h.flight = append(h.inFlight[:0], a)
	h.armFire(t, clock, since)
	resp, err := a.callBase(base)
	if !h.stopFire() {
		resp, err := h.handOver(resp, err)
		return resp, err, true
	}
	if p := a.panicked; p != nil {
		a.end()
		h.recycle()
		panic(p.v)
	}
	resp, err = normalize(base, a.req, resp, err)
	if err != nil || IsTransient(resp, nil) {
		h.started()
		f.sent, f.resp, f.err, f.elapsed = true, resp, err, t.elapsedSince(clock, start, since)
		return nil, nil, false
	}
	a.status = resp.StatusCode
	if record, censored := a.sample(); record && f.dist.Times() {
		// Its latency is measured only when it is recorded.
		a.elapsed = t.elapsedSince(clock, start, since)
		f.dist.Record(a.elapsed, censored, a.start) // a zero start: the latency ended now
	}
	f.record(t, resp, time.Time{}) // no quota was known: nothing needs the start's wall time
	wrapBody(resp, c, nil, nil)
	h.recycleUnfired()
	return resp, nil, true
}

// recycleUnfired returns h to hedgedPool after an operation whose first
// attempt, sent directly, ended it before the hedge fired: as recycle
// does, but clearing only what sendHedged set (the rest was never
// written), which costs less than clearing the whole state.
func (h *hedged) recycleUnfired() {
	h.first, h.deferred, h.launched = attempt{}, deferredSetUp{}, time.Time{}
	h.flight, h.inFlight[0] = nil, nil
	h.delay, h.finishLosers, h.fire = 0, 0, nil
	hedgedPool.Put(h)
}

// callBase sends the attempt's request through base, keeping a panic of
// Base in a.panicked, as a hedged attempt's goroutine does.
func (a *attempt) callBase(base http.RoundTripper) (resp *http.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.panicked = &panicValue{p}
		}
	}()
	return base.RoundTrip(a.req)
}

// setUp sets the operation up, on the goroutine the hedge delay rang on,
// while its first attempt, sent directly, runs: as RoundTrip
// would have before sending it (which deposited into the budget, and
// looked the Throttle's destination and the latencies up), with that
// attempt in flight.
func (h *hedged) setUp() {
	d := &h.deferred
	op := &h.op
	op.t, op.req, op.tmpl = d.t, d.req, d.req
	op.base, op.clock, op.policy = d.base, d.t.clock(), d.t.policy()
	first := firstAttempt{sent: true, dest: d.dest, hedgingSettled: true, dist: d.dist, h: h}
	// begin neither fails nor calls the caller's code for a request
	// sent directly: it has no body to read, no Throttle or hook to ask.
	_ = op.begin(false, &first)
	h.started()
	op.attempts, op.unsent, op.start = 1, holdsNothing, h.first.start
	h.shareSettled()
}

// started gives the first attempt sent directly, and h.launched, its
// start as a time, for the loop that takes it over (startAt).
func (h *hedged) started() {
	h.first.start = startAt(h.first.start, h.deferred.since)
	h.launched = h.first.start
}

// handOver hands the first attempt, sent directly, to the loop the
// hedge delay started once the goroutine it rang on set the operation
// up,
// with what Base answered (resp, err) or its panic, and returns the
// loop's verdict, or raises its panic after giving back what the
// operation held for an attempt not sent.
func (h *hedged) handOver(resp *http.Response, err error) (*http.Response, error) {
	<-h.ready
	a, op := &h.first, &h.op
	if a.panicked == nil {
		resp, err = normalize(op.base, a.req, resp, err)
		a.resp, a.err = a.complete(&h.settled, a.req, resp, err)
		a.elapsed = op.clock.Since(a.start)
	}
	h.results <- a
	v := <-h.verdict
	if v.panicked != nil {
		op.unsent.giveBack(op.budget, &op.adm.ticket, op.dist)
		panic(v.panicked.v)
	}
	return v.resp, v.err
}

// adopt makes a, the operation's attempt, the first attempt that was
// sent directly and answered first: as open and send would have left it.
func (a *attempt) adopt(op *operation, first *firstAttempt) {
	op.attempts = 1
	*a = attempt{number: 1, req: op.req}
	op.unsent = holdsNothing
	a.resp, a.err = a.complete(op, a.req, first.resp, first.err)
}
