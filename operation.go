package httpretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/httpretry/httpretry/internal/latency"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds the operation and its loop: prepare the operation,
// then send an attempt, decide with the pure rules of decide.go, and apply
// the decision (a fresh body, a budget token, the drain, the wait) until a
// decision stops. A first attempt that needs nothing prepared is sent
// before all that (direct.go): the loop takes its answer over when it is
// not final.

// operation is the state of one RoundTrip: its deadline, its body, its
// waits, its counts and what it reports. It lives on RoundTrip's stack
// (a hedged operation's is moved into its hedging state, hedged.op, which
// the goroutines of its attempts and timer reach); nothing per-operation
// is kept on the Transport. It works on each attempt through a *attempt
// with methods of its own (send, complete, report), handed to the steps
// that read it: the sequential operation's one attempt, which lives on
// RoundTrip's stack beside it and is reused for each, or one of a hedged
// operation's attempts in flight (hedged.flight). The attempt is
// not a field: Go's escape analysis does not tell one field of the
// operation from another, and a stack attempt stored in it would move to
// the heap, an allocation on the success path. Its size is held by
// TestOperationStaysSmall.
type operation struct {
	t      *Transport
	req    *http.Request // the caller's request, never modified
	tmpl   *http.Request // what attempts are made from: req, or a copy with a key or a buffered body
	base   http.RoundTripper
	clock  clockwork.Clock
	out    *Outcome // from WithOutcome, or nil
	policy policy

	callerCtx context.Context    // the caller's context
	ctx       context.Context    // the operation's: callerCtx, or derived for Timeout or ownership
	derived   bool               // ctx was derived from callerCtx
	cancel    context.CancelFunc // releases ctx when it was derived for Timeout, else nil

	// timed is set when anything needs clock readings: a deadline, a
	// per-attempt limit, Propagate, hooks or WithOutcome (for durations).
	// Without it the success path reads no clock at all.
	timed       bool
	start       time.Time
	deadline    time.Time // the operation's: the earlier of the caller's and start+Timeout
	hasDeadline bool

	idempotent bool
	body       reqBody

	attempts int           // attempts started
	dist     *latency.Dist // the latencies of the request's key; nil when not learned
	h        *hedged       // the attempts in flight of a hedged operation; nil when not hedged

	waited  time.Duration
	stopErr error // the error that ended the operation, when not the last attempt's

	adm    admission // the Throttle's state of the destination, when one is set
	budget Budget    // the retry budget, the host's own with BudgetPerHost
	unsent holding   // what was taken for the next attempt, not sent yet
}

// holding is what an operation took for an attempt it has not sent yet:
// a panic that ends the operation first gives it back (see abandon).
type holding uint8

const (
	holdsNothing holding = iota
	holdsTicket          // the request taken from the destination's quota, if any (adm.ticket)
	holdsToken           // that, and the budget token of a retry
	holdsHedge           // that, and the extra-load token of a hedge
)

// attempt is the state of one attempt: its context and what releases it,
// its trace and idle watch, when it was sent and what it produced. A
// sequential operation reuses one for each of its attempts; a hedged one
// has one per attempt in flight, each sent on its own goroutine.
type attempt struct {
	number        int           // its position in the operation, 1 for the first
	hedge         bool          // sent while an earlier attempt was still running
	req           *http.Request // the request sent, the attempt's own copy
	resp          *http.Response
	start         time.Time     // when it was sent
	elapsed       time.Duration // how long it took
	status        int           // its status, 0 if it ended in an error
	err           error         // its error
	unsent        bool          // it provably never left the client
	gotConn       bool          // the trace saw it get a connection: it may have been sent
	buffered      bool          // its response body is held in memory
	canceled      bool          // it lost to another attempt
	transient     bool          // what Transient said of its result, asked once when it ended
	cancelAttempt canceler      // ends its own context, when it has one
	idle          *idleWatch
	trace         *connTrace
	tracker       *readTracker // its view of the operation's onceBody
	panicked      *panicValue  // what Base panicked with, on a hedged attempt's goroutine
	recorded      bool         // the Throttle was told how it went
}

func roundTrip(t *Transport, req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("httpretry: nil Request")
	}
	base := t.base()
	ctx := req.Context()
	owned := retriesOwned(ctx)
	var first firstAttempt
	if t.direct() && sendsDirect(req, ctx, base, !owned && t.maxAttempts() > 1) {
		if t.Hedging == nil {
			if resp, final := first.send(t, req, base, owned); final {
				return resp, nil
			}
		} else if resp, err, end := first.sendHedged(t, req, base, owned); end {
			return resp, err
		}
	}
	return operate(t, req, base, owned, &first)
}

// operate runs the operation of req: its first attempt, unless it was
// sent directly (first), then its loop.
func operate(t *Transport, req *http.Request, base http.RoundTripper, outerOwns bool, first *firstAttempt) (*http.Response, error) {
	var op operation // filled field by field: a composite literal would be built in a copy
	var a attempt    // the sequential operation's attempt, reused for each
	op.t, op.req, op.tmpl = t, req, req
	op.base, op.clock, op.policy = base, t.clock(), t.policy()
	// What the operation still holds of the request body is closed when
	// RoundTrip returns, on every path, panics included.
	defer op.body.close(op.req, &a)
	defer a.abandon(&op)
	if err := op.begin(outerOwns, first); err != nil {
		return op.fail(&a, err)
	}
	if op.h != nil {
		return op.h.run(&op, first)
	}
	if first.sent {
		a.adopt(&op, first)
	} else {
		op.open(&a, false)
		a.send(&op, op.base)
	}
	for {
		r, stop := op.assess(&a)
		if resp, err, end := op.stopOrWait(&a, &r, stop); end {
			return resp, err
		}
		op.open(&a, false)
		a.send(&op, op.base)
	}
}

// begin settles the operation's deadline, context and request template,
// admits it in the Throttle and deposits into the budget, unless its first
// attempt was sent directly (first), which did both. An error ends the
// operation before any attempt.
func (op *operation) begin(outerOwns bool, first *firstAttempt) error {
	op.budget = op.t.budgetFor(op.req)
	op.callerCtx = op.req.Context()
	op.ctx = op.callerCtx
	op.out = outcomeFrom(op.callerCtx)
	op.body.owned = hasBody(op.req)
	if outerOwns {
		// An outer layer owns retries, their deadline and their budget.
		op.policy.maxAttempts = 1
	}
	op.setDeadline()
	// From here the first attempt's request from the quota, once taken,
	// is the operation's to give back (OnWait may run before it is sent).
	op.unsent = holdsTicket
	if err := op.throttle(first); err != nil {
		return err
	}
	if !outerOwns && op.policy.maxAttempts > 1 && op.t.marksOwnership(op.base) {
		// Only a Transport that can retry takes ownership: a one-attempt
		// wrapper (for a deadline, or hooks) leaves it to the layer below.
		op.ctx, op.derived = withRetriesOwned(op.ctx), true
	}
	op.shareTried()
	if err := op.prepare(); err != nil {
		op.adm.ticket.Refund()
		return err
	}
	op.setHedging(outerOwns, first)
	if !outerOwns && !first.sent {
		op.budget.Deposit()
	}
	return nil
}

// setDeadline settles the operation's deadline, the earlier of the
// caller's and start+Timeout, and whether it needs clock readings at all.
func (op *operation) setDeadline() {
	t := op.t
	op.timed = op.out != nil || t.OnAttempt != nil || t.OnDone != nil ||
		t.Timeout > 0 || t.AttemptTimeout > 0 || t.Propagate || t.learns()
	if d, ok := op.callerCtx.Deadline(); ok {
		op.deadline, op.hasDeadline, op.timed = d, true, true
	}
	if op.timed {
		op.start = op.clock.Now()
	}
	if t.Timeout > 0 {
		if d := op.start.Add(t.Timeout); !op.hasDeadline || d.Before(op.deadline) {
			op.deadline, op.hasDeadline = d, true
		}
		op.ctx, op.cancel = t.withDeadline(op.clock, op.callerCtx, op.deadline)
		op.derived = true
	}
}

// open starts attempt a, a hedge or not: it numbers it, tells
// OnAttemptStart, and makes its request, with its own context and body.
// a is the sequential operation's own attempt, reused, or a new one of a
// hedged operation.
func (op *operation) open(a *attempt, hedge bool) {
	op.attempts++
	*a = attempt{number: op.attempts, hedge: hedge}
	if op.timed {
		a.start = op.attemptStart()
	}
	if op.t.OnAttemptStart != nil {
		op.t.OnAttemptStart(op.req, op.attempts)
	}
	a.req = op.attemptRequest(a)
	op.body.owned = false // Base owns whatever body it was handed
	op.unsent = holdsNothing
}

// attemptStart is when an attempt about to be sent starts: the
// operation's start for the first one when nothing before it could take
// time (one clock reading less), else now.
func (op *operation) attemptStart() time.Time {
	if op.attempts == 1 && nothingBefore(op.waited, op.tmpl == op.req, op.t.hooksBeforeFirst()) {
		return op.start
	}
	return op.clock.Now()
}

// nothingBefore reports whether nothing between an operation's start and
// its first attempt could take time: no wait for a quota (waited), a
// template that is the caller's request (no body read into memory, no
// key made by NewIdempotencyKey), and no caller's code that judges or
// names the request (hooks).
func nothingBefore(waited time.Duration, callersTemplate, hooks bool) bool {
	return waited == 0 && callersTemplate && !hooks
}

// hooksBeforeFirst reports whether the caller's code that judges or names
// a request runs before an operation's first attempt: Idempotent, or the
// Key of the Throttle or of Hedging.
func (t *Transport) hooksBeforeFirst() bool {
	return t.Idempotent != nil || (t.Throttle != nil && t.Throttle.Key != nil) ||
		(t.Hedging != nil && t.Hedging.Key != nil)
}

// send sends the attempt through base under the smaller of
// AttemptTimeout and the time left, and records what it produced,
// normalised: exactly one of resp and err is non-nil, and a resp has a
// Body. It runs on the caller's goroutine for a sequential attempt and
// for a hedged operation's first (unless FinishLosers), on the attempt's
// own for the other attempts of a hedged one: it writes only to a, and
// reads only what the operation settled before its first attempt.
func (a *attempt) send(op *operation, base http.RoundTripper) {
	stop := interruptBody(a, op.req)
	resp, err := base.RoundTrip(a.req)
	if stop != nil && !stop() && err != nil {
		// The body was closed under Base for the context's end: Base's
		// error is the closed body's, the reason is the context's.
		if cerr := a.req.Context().Err(); !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (request body closed under a blocked read: %w)", cerr, err)
		}
	}
	resp, err = normalize(base, a.req, resp, err)
	a.resp, a.err = a.complete(op, a.req, resp, err)
	if op.timed {
		a.elapsed = op.clock.Since(a.start)
	}
}

// attemptRequest derives attempt a's context and the request to send
// with it.
func (op *operation) attemptRequest(a *attempt) *http.Request {
	t := op.t
	ctx, derived, limit, bounded := op.attemptContext(a)
	req := op.tmpl
	// A retry of a bodyless request sends the template again: nothing of
	// it changes, and the last attempt's response is closed by now.
	resend := op.attempts > 1 && op.body.kind == bodyGetBody
	if resend || op.body.kind == bodyOnce || derived || t.Propagate {
		req = req.WithContext(ctx)
	}
	if t.Propagate {
		propagate(req, op.attempts, limit.Sub(a.start), bounded)
		if bounded {
			a.trace.propagateAt(req.Header, limit, op.clock)
		}
	}
	op.body.attach(req, resend, a)
	return req
}

// attemptContext derives the attempt's context: its time limit, its idle
// watch, its connection trace. derived says whether it differs from the
// operation's context (the template's), without comparing the two; limit
// is the attempt's deadline, when bounded.
func (op *operation) attemptContext(a *attempt) (ctx context.Context, derived bool, limit time.Time, bounded bool) {
	t := op.t
	ctx, derived = op.ctx, op.derived
	limit, bounded = op.deadline, op.hasDeadline
	if op.h.keepsLosers() {
		// A loser may run on after the winner's body is closed, which
		// ends the operation's context: its own limit is the deadline.
		ctx = context.WithoutCancel(ctx)
	}
	if d, ok := op.attemptLimit(a.start); ok {
		var cancel context.CancelFunc
		ctx, cancel = t.withDeadline(op.clock, ctx, d)
		a.cancelAttempt = cancelFunc(cancel)
		limit, bounded, derived = d, true, true
	} else if op.h != nil {
		// Every attempt of a hedged operation can be canceled alone.
		c := newLazyCancelCtx(ctx)
		ctx, a.cancelAttempt, derived = c, c, true
	}
	if t.IdleTimeout > 0 {
		ctx, a.idle = watchIdle(ctx, op.clock, t.IdleTimeout)
		derived = true
	}
	// The trace proves a request unsent, times the attempt for
	// OnAttempt, and with Propagate takes the time spent getting a
	// connection out of the time left it sends.
	if !op.idempotent || t.OnAttempt != nil || (t.Propagate && bounded) {
		ctx, a.trace = withConnTrace(ctx, t.traceLevel(), t.Propagate && bounded)
		derived = true
	}
	if a.idle != nil {
		// After the connection trace, which is pooled only when it is
		// the first trace installed.
		ctx = a.idle.traced(ctx)
	}
	if traced, ok := traceTried(ctx); ok {
		ctx, derived = traced, true
	}
	return ctx, derived, limit, bounded
}

// attemptLimit is the attempt's deadline, if it has one: the earliest of
// its start plus AttemptTimeout, its start plus the learned limit, and the
// operation's deadline when either applies (or when a hedged loser must
// keep the deadline it no longer inherits).
func (op *operation) attemptLimit(start time.Time) (time.Time, bool) {
	limit := op.t.AttemptTimeout
	if op.dist != nil && op.t.LearnAttemptTimeout != nil {
		limit = shorterLimit(limit, op.dist.AttemptLimit(op.t.LearnAttemptTimeout.minSamples()))
	}
	if limit <= 0 {
		return op.deadline, op.hasDeadline && op.h.keepsLosers()
	}
	d := start.Add(limit)
	if op.hasDeadline && op.deadline.Before(d) {
		d = op.deadline
	}
	return d, true
}

// shorterLimit is the shorter of two attempt limits, where 0 (or less)
// means none.
func shorterLimit(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// normalize makes Base's answer one of a response with a Body or an
// error, as http.Client expects of a RoundTripper.
func normalize(base http.RoundTripper, req *http.Request, resp *http.Response, err error) (*http.Response, error) {
	if err != nil && resp != nil {
		// A RoundTripper must not return both; trust the error.
		if resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	if err == nil && resp == nil {
		return nil, fmt.Errorf("httpretry: %T returned a nil response and a nil error", base)
	}
	if err == nil && resp.Body == nil {
		// As http.Client does: a nil Body may stand for an empty one,
		// unless the response says it has content.
		if resp.ContentLength > 0 && req.Method != http.MethodHead {
			return nil, fmt.Errorf("httpretry: %T returned a response with a nil Body", base)
		}
		resp.Body = http.NoBody
	}
	return resp, err
}

// complete finishes the attempt after Base returned: it puts the response
// body under the idle watch, reads it when the attempt includes the body
// (BufferResponse), and tells an attempt the Transport's own limits ended
// from one the caller ended.
//
// It runs where send runs: it writes only to a, and reads only what the
// operation settled before its first attempt.
func (a *attempt) complete(op *operation, req *http.Request, resp *http.Response, err error) (*http.Response, error) {
	if a.idle != nil {
		if resp == nil {
			err = a.idle.wrap(err)
		} else {
			a.idle.headers()
			// A switched protocol has no response left to go quiet:
			// its body is not watched, and the attempt's context
			// lives until it is closed. An empty body (a 204, a
			// HEAD) has nothing to wait for: it stays http.NoBody,
			// and the attempt is released before RoundTrip returns.
			if resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != http.NoBody {
				resp.Body = &idleBody{rc: resp.Body, w: a.idle}
			}
		}
	}
	a.buffered = false
	if err == nil && op.bufferable(req, resp) {
		buffered, berr := bufferResponse(resp, op.t.BufferResponse)
		if berr != nil {
			resp, err = nil, berr
		}
		a.buffered = buffered
	}
	if err != nil && !op.callerEnded() && !errors.Is(err, ErrIdleTimeout) && done(req.Context()) {
		// A context the Transport derived ended the attempt, not the
		// caller's: a per-attempt timeout, which is transient.
		err = &attemptTimeoutError{err: err}
	}
	if err != nil {
		a.end()
	}
	a.unsent, a.gotConn = false, false
	if a.trace != nil {
		var unsent bool
		unsent, a.gotConn = a.trace.end()
		a.unsent = unsent && err != nil
	}
	a.setResult(resp, err)
	return resp, err
}

// setResult records what the attempt produced.
func (a *attempt) setResult(resp *http.Response, err error) {
	a.status, a.err = 0, err
	if resp != nil {
		a.status = resp.StatusCode
	}
}

// end releases the attempt's context and idle watch.
func (a *attempt) end() {
	if a.idle != nil {
		a.idle.stop()
	}
	if a.cancelAttempt != nil {
		a.cancelAttempt.cancel()
	}
}

// discard drains and closes a response that will not be returned, and
// releases the attempt, so that nothing is held while waiting.
func (a *attempt) discard() {
	if a.resp != nil {
		drain(a.resp)
	}
	a.end()
}

// assess is the one path after an attempt of an operation ends, sequential
// or hedged (a first attempt sent directly whose answer is final ends
// before there is an operation: see direct.go):
// Transient is asked of its result, once; the Throttle is told how it
// went, and the latency learned; and the facts of the attempt the pure
// rules need without the clock are gathered, once, with what eligible
// says of them.
func (op *operation) assess(a *attempt) (r facts, stop StopReason) {
	a.transient = op.t.transient(a.resp, a.err)
	op.record(a)
	a.learn(op.dist)
	op.gather(&r, a)
	return r, eligible(&op.policy, &r)
}

// stopOrWait goes on after attempt a, whose facts are gathered (stop is
// what eligible said of them), when no other attempt is in flight: it
// decides, reports the attempt, and either ends the operation, returning
// end and its answer, or discards the attempt's answer and waits for the
// next attempt.
func (op *operation) stopOrWait(a *attempt, r *facts, stop StopReason) (resp *http.Response, err error, end bool) {
	d := stopWith(stop)
	if stop == "" {
		d = op.decideRetry(a, r)
	}
	a.report(op, d)
	if d.stop != "" {
		resp, err = op.finish(a, a.resp, d.stop)
		return resp, err, true
	}
	a.log(op, slog.LevelInfo, "httpretry: retry", d.wait, "")
	a.discard()
	a.resp = nil // closed: nothing is left of it to close
	if reason := op.wait(a, d); reason != "" {
		op.budget.Refund()
		op.unsent = holdsNothing
		resp, err = op.finish(a, nil, reason)
		return resp, err, true
	}
	return nil, nil, false
}

// decideRetry completes the facts about attempt a, which just ended and which
// eligible allowed to be retried, and lets the pure rules of next decide
// every stop reason; the Throttle's draw and the budget's token, effects,
// are asked for only when next allowed the retry without them, the token
// last, and next decides again with them.
func (op *operation) decideRetry(a *attempt, r *facts) decision {
	// Every rule up to body_not_rewindable allowed a retry. That rule's
	// last fact is whether GetBody gives a fresh body; then the rules
	// that need the clock plan the wait, with the time as it is after
	// the attempt. A success never gets here, so it reads no clock and
	// draws no jitter.
	switch op.body.kind {
	case bodyGetBody:
		r.rewindable = op.body.fresh(op.tmpl)
	case bodyOnce:
		// Base may have read the body since the facts were gathered:
		// sealing it makes a late read by this attempt fail instead of
		// taking what the next attempt would send.
		r.rewindable = a.tracker.seal()
	}
	resp := a.resp
	now := op.clock.Now()
	r.deadline, r.hasDeadline = op.deadline, op.hasDeadline
	r.serverDelay, r.hasServerDelay = serverDelay(resp, now)
	if h := op.h; h != nil {
		r.serverDelay, r.hasServerDelay = longestServerDelay(r.serverDelay, r.hasServerDelay, h.notBefore, h.hasNotBefore, now)
	}
	r.backoff = op.t.jitter(backoffWindow(op.t.baseDelay(), op.t.maxDelay(), op.attempts-1))
	r.quotaReset, r.quotaSpent = op.quotaSpent(r, resp, now)
	// A body obtained for a retry that then stops is closed by cleanup.
	d := next(op.policy, *r, now)
	if d.stop != "" {
		return d
	}
	// The verdicts with an effect, each asked only when every rule before
	// it allowed the retry: the Throttle's draw, then the budget's token,
	// last, so that a token is withdrawn only for a retry every rule
	// allows now (one that then does not start after its wait gives it
	// back).
	r.throttled = !op.adm.mayRetry(op.t.Throttle, op.clock)
	if !r.throttled {
		r.noToken = !op.budget.Withdraw(op.ctx)
	}
	if d = next(op.policy, *r, now); d.stop == "" {
		d.at = now.Add(d.wait)
		// The last attempt's request from the quota was sent; the
		// retry's is taken after the wait.
		op.adm.ticket = throttle.Ticket{}
		op.unsent = holdsToken
	}
	return d
}

// abandon ends what a panic on the caller's goroutine (a hook, a Logger's
// handler, Base) leaves of the operation, as a return would have, then
// raises the panic again: the response of attempt a, which will not be
// returned, is drained and closed, the attempt and the operation's context
// are released, what was taken for an attempt not sent yet (its
// request from the quota, a retry's budget token) is given back, and an
// attempt sent whose end the Throttle was not told of (Base or Transient
// panicked) is recorded as one that ended without an answer.
func (a *attempt) abandon(op *operation) {
	p := recover()
	if p == nil {
		return
	}
	if a.resp != nil {
		drain(a.resp)
	}
	a.end()
	if op.cancel != nil {
		op.cancel()
	}
	op.unsent.giveBack(op.budget, &op.adm.ticket, op.dist)
	if op.unsent == holdsNothing && a.number > 0 {
		a.recordUnheard(op) // sent: a hedged operation's attempts are the loop's
	}
	panic(p)
}

// giveBack gives back what was taken for an attempt not sent: the
// extra-load token of a hedge (from dist), the budget token of a retry or
// a hedge, and the request taken from the quota (ticket).
func (u holding) giveBack(budget Budget, ticket *throttle.Ticket, dist *latency.Dist) {
	switch u {
	case holdsHedge:
		dist.RefundExtra()
		budget.Refund()
		ticket.Refund()
	case holdsToken:
		budget.Refund()
		ticket.Refund()
	case holdsTicket:
		ticket.Refund()
	}
}

// gather describes attempt a, which just ended, in r for the pure rules,
// without the facts that need the clock or GetBody: decideRetry adds those
// only for a failure that may be retried.
func (op *operation) gather(r *facts, a *attempt) {
	r.attempts = op.attempts
	r.failed = a.err != nil
	r.transient = a.transient
	if r.failed || r.transient {
		r.callerEnded = op.callerEnded()
	}
	if r.failed {
		// The error proves nothing when the attempt had a
		// connection: net/http resends a request whose reused
		// connection broke, and a refused dial of that resend hides
		// the first send.
		a.unsent = a.unsent || (!a.gotConn && neverSent(op.req, a.err))
	}
	if !r.transient || r.callerEnded {
		return
	}
	r.repeatable = op.idempotent || a.unsent || serverVouches(a.resp)
	r.rewindable = op.body.rewindable(a.tracker)
}

// wait sleeps until the planned start of the attempt after a (d.at), ending
// early when the operation's context ends, and then checks that the
// attempt may still start. The wait was planned from the time the
// decision was made, so the drain and the hooks since then are part of
// it, not added to it. It returns a stop reason, or "" to go on.
func (op *operation) wait(a *attempt, d decision) StopReason {
	before := op.waited
	var slept time.Duration
	if rest := d.at.Sub(op.clock.Now()); rest > 0 {
		slept, _ = sleep(op.clock, op.ctx, op.cancelChan(), rest)
		op.waited += slept
	}
	reason := op.afterWait(a)
	if op.t.OnWait != nil {
		// A quota waited for after the sleep is the server's too.
		total := op.waited - before
		op.t.OnWait(op.req, Wait{After: a.number, Waited: total, RetryAfter: min(slept, d.retryAfter) + total - slept})
	}
	return reason
}

// sleep sleeps for d on clock, or until ctx or the channel cancel (the
// deprecated Request.Cancel, nil when unset) ends, and returns the time
// slept and whether it slept the whole of d.
func sleep(clock clockwork.Clock, ctx context.Context, cancel <-chan struct{}, d time.Duration) (time.Duration, bool) {
	start := clock.Now()
	timer := clock.NewTimer(d)
	full := false
	select {
	case <-timer.Chan():
		full = true
	case <-ctx.Done():
		timer.Stop()
	case <-cancel:
		timer.Stop()
	}
	return clock.Since(start), full
}

// waitFactsAt is what resume needs to know of an operation at now:
// whether its caller ended it, and the time left before its deadline,
// when it has one.
func waitFactsAt(callerEnded bool, deadline time.Time, bounded bool, now func() time.Time) waitFacts {
	w := waitFacts{callerEnded: callerEnded, bounded: bounded}
	if bounded {
		w.left = deadline.Sub(now())
	}
	return w
}

// afterWait gathers what the pure rules of resume need to say whether the
// planned attempt may start now that the wait is over, and asks the
// destination's quota for the retry (waited for once more with
// WaitQuota, and for its turn during a paced release) only once resume allowed the retry without it. a is the
// attempt before the wait.
func (op *operation) afterWait(a *attempt) StopReason {
	w := waitFactsAt(op.callerEnded(), op.deadline, op.hasDeadline, op.clock.Now)
	reason := resume(op.policy, w)
	if reason == "" && op.adm.dest != nil && !op.takeQuotaForRetry() {
		// The quota's wait may have ended with the caller or the
		// deadline: the facts are gathered again after it.
		w = waitFactsAt(op.callerEnded(), op.deadline, op.hasDeadline, op.clock.Now)
		w.quotaSpent = true
		reason = resume(op.policy, w)
	}
	switch reason {
	case Canceled:
		op.stopErr = withCause(op.callerCtx, op.callerErr())
	case Throttled:
		// Others spent the quota's new window while this one waited.
		op.stopErr = throttle.ErrQuotaExhausted
		if a.err != nil {
			op.stopErr = fmt.Errorf("%w (last attempt: %w)", throttle.ErrQuotaExhausted, a.err)
		}
	}
	return reason
}
