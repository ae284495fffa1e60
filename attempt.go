package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds the loop: prepare the operation, then send an attempt,
// decide with the pure rules of decide.go, and apply the decision (a fresh
// body, a budget token, the drain, the wait) until a decision stops.

// operation is the state of one RoundTrip: its deadline, its attempts and
// its waits. It lives on RoundTrip's stack; nothing per-operation is kept
// on the Transport.
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
	timed          bool
	start          time.Time
	deadline       time.Time // the operation's: the earlier of the caller's and start+Timeout
	hasDeadline    bool
	callerDeadline time.Time // the caller's context's, if it has one

	idempotent bool
	body       bodyKind
	ownsBody   bool          // the caller's body is still ours to close
	once       *onceBody     // the body of a bodyOnce operation
	nextBody   io.ReadCloser // body obtained for the next attempt, not yet sent

	attempts int // attempts started
	// attempt is the last attempt: the one in flight, the one that just
	// ended, or, for a hedged operation, the one being reported.
	attempt

	hedged // the attempts in flight of a hedged operation, and its counts

	waited     time.Duration
	wakeAt     time.Time     // when the next attempt is planned to start
	wakeServer time.Duration // the part of the wait until wakeAt the server asked for
	stopErr    error         // the error that ended the operation, when not err

	admission        // the Throttle's state of the destination, when one is set
	budget    Budget // the retry budget, the host's own with BudgetPerHost
}

// attempt is the state of one attempt: its context and what releases it,
// its trace and idle watch, when it was sent and what it produced. The
// sequential loop keeps one in its operation; a hedged operation has
// several in flight, each on its own goroutine until it ends.
type attempt struct {
	number        int           // its position in the operation, 1 for the first
	hedge         bool          // sent while an earlier attempt was still running
	req           *http.Request // the request sent, the attempt's own copy
	resp          *http.Response
	lastStart     time.Time     // when it was sent
	lastElapsed   time.Duration // how long it took
	status        int           // its status, 0 if it ended in an error
	err           error         // its error
	unsent        bool          // it provably never left the client
	gotConn       bool          // the trace saw it get a connection: it may have been sent
	buffered      bool          // its response body is held in memory
	canceled      bool          // it lost to another attempt
	transient     bool          // what Transient said of its result, asked once when it ended
	cancelAttempt context.CancelFunc
	idle          *idleWatch
	trace         *connTrace
	tracker       *readTracker // its view of the operation's onceBody
	panicked      *panicValue  // what Base panicked with, on a hedged attempt's goroutine
}

func roundTrip(t *Transport, req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("httpretry: nil Request")
	}
	var op operation // filled field by field: a composite literal would be built in a copy
	op.t, op.req, op.tmpl = t, req, req
	op.base, op.clock, op.policy = t.base(), t.clock(), t.policy()
	defer op.cleanup()
	if err := op.begin(); err != nil {
		return op.fail(err)
	}
	if op.hedging {
		return op.runHedged()
	}
	for {
		resp, err := op.send()
		op.recordAttempt(resp, err)
		d := op.decide(resp, err)
		op.onAttempt(d)
		if d.stop != "" {
			return op.finish(resp, d.stop)
		}
		op.logRetry(d)
		op.discard(resp)
		if reason := op.wait(); reason != "" {
			op.budget.Refund()
			return op.finish(nil, reason)
		}
	}
}

// begin settles the operation's deadline, context and request template,
// and deposits into the budget. An error ends the operation before any
// attempt.
func (op *operation) begin() error {
	op.budget = op.t.budgetFor(op.req)
	op.callerCtx = op.req.Context()
	op.ctx = op.callerCtx
	op.out = outcomeFrom(op.callerCtx)
	op.ownsBody = op.req.Body != nil && op.req.Body != http.NoBody
	owned := retriesOwned(op.callerCtx)
	if owned {
		// An outer layer owns retries, their deadline and their budget.
		op.policy.maxAttempts = 1
	}
	op.setDeadline()
	if err := op.throttle(); err != nil {
		return err
	}
	if !owned && op.policy.maxAttempts > 1 && op.t.marksOwnership(op.base) {
		// Only a Transport that can retry takes ownership: a one-attempt
		// wrapper (for a deadline, or hooks) leaves it to the layer below.
		op.ctx, op.derived = withRetriesOwned(op.ctx), true
	}
	op.shareTried()
	if err := op.prepare(); err != nil {
		op.refundQuota()
		return err
	}
	op.setHedging(owned)
	if !owned {
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
		op.callerDeadline = d
	}
	if op.timed {
		op.start = op.clock.Now()
	}
	if t.Timeout > 0 {
		if d := op.start.Add(t.Timeout); !op.hasDeadline || d.Before(op.deadline) {
			op.deadline, op.hasDeadline = d, true
		}
		op.ctx, op.cancel = op.withDeadline(op.callerCtx, op.deadline)
		op.derived = true
	}
}

// cleanup closes what the operation still holds when RoundTrip returns,
// on every path, panics included: the caller's body if no attempt took
// it, an unsent body for a retry, and a body that cannot be rewound
// unless Base holds it.
func (op *operation) cleanup() {
	if op.ownsBody {
		op.req.Body.Close()
	}
	if op.once != nil {
		op.once.end(op.tracker)
	}
	if op.nextBody != nil {
		op.nextBody.Close()
	}
}

// send makes one attempt under the smaller of AttemptTimeout and the time
// left, and normalises what Base returned: exactly one of resp and err is
// non-nil, and a resp has a Body.
func (op *operation) send() (*http.Response, error) {
	op.attempts++
	op.number = op.attempts
	if op.timed {
		op.lastStart = op.clock.Now()
	}
	if op.t.OnAttemptStart != nil {
		op.t.OnAttemptStart(op.req, op.attempts)
	}
	req := op.attemptRequest()
	op.ownsBody = false // Base owns whatever body it was handed
	resp, err := op.base.RoundTrip(req)
	resp, err = normalize(op.base, req, resp, err)
	resp, err = op.attempt.complete(op, req, resp, err)
	if op.timed {
		op.lastElapsed = op.clock.Since(op.lastStart)
	}
	// Transient is asked once per attempt, here; the rules and the
	// latency read its answer.
	op.attempt.transient = op.t.transient(resp, err)
	if op.dist != nil {
		op.learn(&op.attempt)
	}
	return resp, err
}

// attemptRequest derives the attempt's context and the request to send
// with it.
func (op *operation) attemptRequest() *http.Request {
	t := op.t
	ctx, derived, limit, bounded := op.attemptContext()
	req := op.tmpl
	// A retry of a bodyless request sends the template again: nothing of
	// it changes, and the last attempt's response is closed by now.
	resend := op.attempts > 1 && op.body == bodyGetBody
	if resend || op.body == bodyOnce || derived || t.Propagate {
		req = req.WithContext(ctx)
	}
	if t.Propagate {
		propagate(req, op.attempts, limit.Sub(op.lastStart), bounded)
		if bounded {
			op.trace.propagateAt(req.Header, limit, op.clock)
		}
	}
	op.attachBody(req, resend)
	return req
}

// attemptContext derives the attempt's context: its time limit, its idle
// watch, its connection trace. derived says whether it differs from the
// operation's context (the template's), without comparing the two; limit
// is the attempt's deadline, when bounded.
func (op *operation) attemptContext() (ctx context.Context, derived bool, limit time.Time, bounded bool) {
	t := op.t
	ctx, derived = op.ctx, op.derived
	limit, bounded = op.deadline, op.hasDeadline
	op.cancelAttempt, op.idle, op.trace = nil, nil, nil
	if op.hedging && op.finishLosers > 0 {
		// A loser may run on after the winner's body is closed, which
		// ends the operation's context: its own limit is the deadline.
		ctx = context.WithoutCancel(ctx)
	}
	if d, ok := op.attemptLimit(); ok {
		ctx, op.cancelAttempt = op.withDeadline(ctx, d)
		limit, bounded, derived = d, true, true
	} else if op.hedging {
		// Every attempt of a hedged operation can be canceled alone.
		ctx, op.cancelAttempt = context.WithCancel(ctx)
		derived = true
	}
	if t.IdleTimeout > 0 {
		ctx, op.idle = watchIdle(ctx, op.clock, t.IdleTimeout)
		derived = true
	}
	// The trace proves a request unsent, times the attempt for
	// OnAttempt, and with Propagate takes the time spent getting a
	// connection out of the time left it sends.
	if !op.idempotent || t.OnAttempt != nil || (t.Propagate && bounded) {
		ctx, op.trace = withConnTrace(ctx, t.traceLevel(), t.Propagate && bounded)
		derived = true
	}
	if op.idle != nil {
		// After the connection trace, which is pooled only when it is
		// the first trace installed.
		ctx = op.idle.traced(ctx)
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
func (op *operation) attemptLimit() (time.Time, bool) {
	limit := op.t.AttemptTimeout
	if op.dist != nil && op.t.LearnAttemptTimeout != nil {
		if l := op.dist.AttemptLimit(op.t.LearnAttemptTimeout.minSamples()); l > 0 && (limit <= 0 || l < limit) {
			limit = l
		}
	}
	if limit <= 0 {
		return op.deadline, op.hasDeadline && op.hedging && op.finishLosers > 0
	}
	d := op.lastStart.Add(limit)
	if op.hasDeadline && op.deadline.Before(d) {
		d = op.deadline
	}
	return d, true
}

// attachBody gives the attempt's own request its body: the one GetBody
// made for a retry (resend), or a tracker of the body that cannot be
// rewound.
func (op *operation) attachBody(req *http.Request, resend bool) {
	if resend {
		req.Body, op.nextBody = op.nextBody, nil
	} else if op.body == bodyOnce {
		// Each attempt reads through its own tracker, so that the next
		// one can tell whether this one read anything.
		op.tracker = &readTracker{body: op.once}
		req.Body = op.tracker
	}
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
// It runs on the attempt's own goroutine when the operation is hedged: it
// writes only to a, and reads only what the operation settled before its
// first attempt.
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

// endAttempt releases the last attempt's context and idle watch.
func (op *operation) endAttempt() { op.attempt.end() }

// end releases the attempt's context and idle watch.
func (a *attempt) end() {
	if a.idle != nil {
		a.idle.stop()
	}
	if a.cancelAttempt != nil {
		a.cancelAttempt()
	}
}

// decide gathers the facts about the attempt that just ended and lets the
// pure rules of next decide every stop reason; the Throttle's draw and
// the budget's token, effects, are asked for only when next allowed the
// retry without them, the token last, and next decides again with them.
func (op *operation) decide(resp *http.Response, err error) decision {
	var r facts
	op.gather(&r, resp, err)
	if reason := eligible(&op.policy, &r); reason != "" {
		return stopWith(reason)
	}
	// Every rule up to body_not_rewindable allowed a retry. That rule's
	// last fact is whether GetBody gives a fresh body; then the rules
	// that need the clock plan the wait, with the time as it is after
	// the attempt. A success never gets here, so it reads no clock and
	// draws no jitter.
	switch op.body {
	case bodyGetBody:
		r.rewindable = op.getBody()
	case bodyOnce:
		// Base may have read the body since the facts were gathered:
		// sealing it makes a late read by this attempt fail instead of
		// taking what the next attempt would send.
		r.rewindable = op.tracker.seal()
	}
	now := op.clock.Now()
	r.deadline, r.hasDeadline = op.deadline, op.hasDeadline
	r.serverDelay, r.hasServerDelay = op.retryAfter(resp, now)
	r.serverDelay, r.hasServerDelay = longestServerDelay(r.serverDelay, r.hasServerDelay, op.notBefore, op.hasNotBefore, now)
	r.backoff = op.t.jitter(backoffWindow(op.t.baseDelay(), op.t.maxDelay(), op.attempts-1))
	r.quotaReset, r.quotaSpent = op.quotaSpent(&r, resp, now)
	// A body obtained for a retry that then stops is closed by cleanup.
	d := next(op.policy, r, now)
	if d.stop != "" {
		return d
	}
	// The verdicts with an effect, each asked only when every rule before
	// it allowed the retry: the Throttle's draw, then the budget's token,
	// last, so that a token is withdrawn only for a retry that is sent.
	r.throttled = !op.admitRetry()
	if !r.throttled {
		r.noToken = !op.budget.Withdraw(op.ctx)
	}
	if d = next(op.policy, r, now); d.stop != "" {
		return d
	}
	op.wakeAt, op.wakeServer = now.Add(d.wait), d.retryAfter
	return d
}

// getBody asks GetBody for the body of the next attempt, and reports
// whether it gave one.
func (op *operation) getBody() bool {
	b, err := op.tmpl.GetBody()
	if err != nil || b == nil {
		return false
	}
	op.nextBody = b
	return true
}

// gather describes the attempt that just ended in r for the pure rules,
// without the facts that need the clock or GetBody: decide adds those
// only for a failure that may be retried.
func (op *operation) gather(r *facts, resp *http.Response, err error) {
	r.attempts = op.attempts
	r.failed = err != nil
	r.transient = op.attempt.transient
	if r.failed || r.transient {
		r.callerEnded = op.callerEnded()
	}
	if r.failed {
		// The error proves nothing when the attempt had a
		// connection: net/http resends a request whose reused
		// connection broke, and a refused dial of that resend hides
		// the first send.
		op.unsent = op.unsent || (!op.gotConn && neverSent(op.req, err))
	}
	if !r.transient || r.callerEnded {
		return
	}
	r.repeatable = op.idempotent || op.unsent || serverVouches(resp)
	switch op.body {
	case bodyOnce:
		// Only what was never read can be sent again whole: nothing
		// of it left, whether or not the request did.
		r.rewindable = !op.tracker.didRead()
	case bodyDirect:
		r.rewindable = false
	default:
		r.rewindable = true
	}
}

// discard drains and closes a response that will not be returned, and
// releases its attempt, so that nothing is held while waiting.
func (op *operation) discard(resp *http.Response) {
	if resp != nil {
		drain(resp)
	}
	op.endAttempt()
}

// wait sleeps until the planned start of the next attempt, ending early
// when the operation's context ends, and then checks that the attempt may
// still start. The wait was planned from the time the decision was made,
// so the drain and the hooks since then are part of it, not added to it.
// It returns a stop reason, or "" to go on.
func (op *operation) wait() StopReason {
	before := op.waited
	slept := op.sleepUntilWake()
	reason := op.afterWait()
	if op.t.OnWait != nil {
		// A quota waited for after the sleep is the server's too.
		total := op.waited - before
		op.t.OnWait(op.req, Wait{After: op.number, Waited: total, RetryAfter: min(slept, op.wakeServer) + total - slept})
	}
	return reason
}

// sleepUntilWake sleeps until the next attempt's planned start, or until
// the operation's context or Request.Cancel ends, and returns the time
// slept, which it adds to the operation's.
func (op *operation) sleepUntilWake() time.Duration {
	start := op.clock.Now()
	d := op.wakeAt.Sub(start)
	if d <= 0 {
		return 0
	}
	timer := op.clock.NewTimer(d)
	select {
	case <-timer.Chan():
	case <-op.ctx.Done():
		timer.Stop()
	case <-op.cancelChan():
		timer.Stop()
	}
	slept := op.clock.Since(start)
	op.waited += slept
	return slept
}

// afterWait decides whether the planned attempt may start now that the
// wait is over: not once the caller has ended the operation or the
// deadline leaves too little time, nor when the destination's quota was
// spent meanwhile (waited for once more with WaitQuota).
func (op *operation) afterWait() StopReason {
	if op.callerEnded() {
		op.stopErr = op.callerErr()
		return Canceled
	}
	if op.hasDeadline && !startable(op.deadline.Sub(op.clock.Now()), op.policy.minAttemptTime) {
		// The wake-up came much later than planned (the process was
		// stopped), or the operation's Timeout ended the wait.
		return DeadlineExhausted
	}
	if op.dest != nil && !op.takeQuotaForRetry() {
		// Others spent the quota's new window while this one waited.
		op.stopErr = throttle.ErrQuotaExhausted
		if op.err != nil {
			op.stopErr = fmt.Errorf("%w (last attempt: %w)", throttle.ErrQuotaExhausted, op.err)
		}
		return Throttled
	}
	return ""
}
