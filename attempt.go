package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
)

// operation is the state of one RoundTrip: its deadline, its attempts and
// its waits. It lives on RoundTrip's stack; nothing per-operation is kept
// on the Transport.
type operation struct {
	t     *Transport
	req   *http.Request // the caller's request, never modified
	tmpl  *http.Request // what attempts are made from: req, or a copy with a key or a buffered body
	base  http.RoundTripper
	clock clockwork.Clock
	out   *Outcome // from WithOutcome, or nil

	callerCtx context.Context    // the caller's context
	ctx       context.Context    // the operation's: callerCtx, or derived for Timeout
	cancel    context.CancelFunc // releases ctx when it was derived, else nil

	// timed is set when anything needs clock readings: a deadline, a
	// per-attempt limit, hooks, a logger or WithOutcome. Without it the
	// success path reads no clock at all.
	timed          bool
	start          time.Time
	deadline       time.Time // the operation's: the earlier of the caller's and start+Timeout
	hasDeadline    bool
	callerDeadline time.Time // the caller's context's, if it has one

	maxAttempts int
	attempts    int
	idempotent  bool
	body        bodyKind
	once        *onceBody     // the body of a bodyOnce operation
	tracker     *readTracker  // the last attempt's view of once
	nextBody    io.ReadCloser // body obtained for the next attempt, not yet sent
	buffered    bool          // the last response's body is held in memory

	waited      time.Duration
	lastStart   time.Time     // when the last attempt was sent
	lastElapsed time.Duration // how long the last attempt took
	status      int           // last attempt's status, 0 if it ended in an error
	err         error         // last attempt's error
	stopErr     error         // the error that ended the operation, when not err
}

// decision is what happens after an attempt: a stop, or a retry after wait.
type decision struct {
	stop StopReason // empty for a retry
	wait time.Duration
}

func roundTrip(t *Transport, req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("httpretry: nil Request")
	}
	op := operation{
		t:           t,
		req:         req,
		tmpl:        req,
		base:        t.base(),
		clock:       t.clock(),
		callerCtx:   req.Context(),
		maxAttempts: t.maxAttempts(),
	}
	op.ctx = op.callerCtx
	op.out = outcomeFrom(op.callerCtx)
	owned := retriesOwned(op.callerCtx)
	if owned {
		// An outer layer owns retries, their deadline and their budget.
		op.maxAttempts = 1
	}
	op.timed = op.out != nil || t.OnAttempt != nil || t.OnDone != nil || t.Logger != nil ||
		t.Timeout > 0 || t.AttemptTimeout > 0 || t.Propagate
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
	}
	if !owned && marksOwnership(op.base) {
		op.ctx = withRetriesOwned(op.ctx)
	}

	// The caller's body is ours to close until an attempt hands it to
	// Base, which then closes it (the RoundTripper contract), or until it
	// is buffered or wrapped. Every early return closes it here.
	reqBodyOpen := req.Body != nil && req.Body != http.NoBody
	defer func() {
		if reqBodyOpen {
			req.Body.Close()
		}
		if op.once != nil {
			op.once.close()
		}
		if op.nextBody != nil {
			op.nextBody.Close()
		}
	}()

	if err := op.prepare(); err != nil {
		reqBodyOpen = false // prepare closed it
		return op.fail(err, Final)
	}
	reqBodyOpen = reqBodyOpen && op.body != bodyOnce && op.tmpl.Body == req.Body
	if !owned {
		op.t.budget().Deposit()
	}

	for {
		resp, cancelAttempt, err := op.attempt()
		reqBodyOpen = false
		d := op.decide(resp, err)
		if d.stop == "" && op.callerEnded() {
			// A response came, but nobody is waiting for another attempt.
			op.refund()
			d = op.dropNextBody(Canceled)
		}
		op.onAttempt(d.wait)
		if d.stop != "" {
			return op.finish(resp, d.stop, cancelAttempt)
		}
		op.logRetry(d)
		if resp != nil {
			drain(resp)
		}
		if cancelAttempt != nil {
			cancelAttempt()
		}
		if reason := op.wait(d.wait); reason != "" {
			op.refund()
			return op.finish(nil, reason, nil)
		}
	}
}

// attempt sends one attempt under the smaller of AttemptTimeout and the
// time left, and normalises what Base returned: exactly one of resp and
// err is non-nil, and a resp has a Body. It also returns the attempt
// context's CancelFunc, or nil when the attempt ran under the operation's
// context.
func (op *operation) attempt() (*http.Response, context.CancelFunc, error) {
	op.attempts++
	t := op.t
	ctx := op.ctx
	var cancel context.CancelFunc
	if op.timed {
		op.lastStart = op.clock.Now()
	}
	limit, bounded := op.deadline, op.hasDeadline
	if t.AttemptTimeout > 0 {
		d := op.lastStart.Add(t.AttemptTimeout)
		if op.hasDeadline && op.deadline.Before(d) {
			d = op.deadline
		}
		ctx, cancel = op.withDeadline(op.ctx, d)
		limit, bounded = d, true
	}

	req := op.tmpl
	// A retry of a bodyless request sends the template again: nothing of
	// it changes, and the last attempt's response is closed by now.
	if (op.attempts > 1 && op.body != bodyNone) || ctx != req.Context() || t.Propagate {
		req = req.WithContext(ctx)
	}
	if t.Propagate {
		propagate(req, op.attempts, limit.Sub(op.lastStart), bounded)
	}
	if op.attempts > 1 {
		switch op.body {
		case bodyGetBody:
			req.Body, op.nextBody = op.nextBody, nil
		case bodyOnce:
			op.tracker = &readTracker{body: op.once}
			req.Body = op.tracker
		}
	}

	resp, err := op.base.RoundTrip(req)
	switch {
	case err != nil && resp != nil:
		// A RoundTripper must not return both; trust the error.
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp = nil
	case err == nil && resp == nil:
		err = fmt.Errorf("httpretry: %T returned a nil response and a nil error", op.base)
	case err == nil && resp.Body == nil:
		// As http.Client does: a nil Body may stand for an empty one,
		// unless the response says it has content.
		if resp.ContentLength > 0 && req.Method != http.MethodHead {
			err = fmt.Errorf("httpretry: %T returned a response with a nil Body", op.base)
			resp = nil
		} else {
			resp.Body = http.NoBody
		}
	}
	op.buffered = false
	if err == nil && op.bufferable(req, resp) {
		buffered, berr := bufferResponse(resp, t.BufferResponse)
		switch {
		case berr != nil:
			resp, err = nil, berr
		case buffered && cancel != nil:
			// The body is in memory: the attempt's context has done its
			// work.
			cancel()
			cancel = nil
		}
		op.buffered = buffered
	}
	if err != nil && ctx != op.callerCtx && done(ctx) && !op.callerEnded() {
		// A context the Transport derived ended the attempt, not the
		// caller's: a per-attempt timeout, which is transient.
		err = &attemptTimeoutError{err: err}
	}

	op.status, op.err = 0, err
	if resp != nil {
		op.status = resp.StatusCode
	}
	if op.timed {
		op.lastElapsed = op.clock.Since(op.lastStart)
	}
	return resp, cancel, err
}

// decide applies the stop rules, in their documented order, to the
// attempt that just ended. A retry withdraws its token only after every
// other check has passed.
func (op *operation) decide(resp *http.Response, err error) decision {
	t := op.t
	if err != nil && op.callerEnded() {
		return decision{stop: Canceled}
	}
	if !t.transient(resp, err) {
		return decision{stop: Final}
	}
	if op.attempts >= op.maxAttempts {
		return decision{stop: AttemptsExhausted}
	}
	if !op.idempotent && !serverVouches(resp) && (err == nil || !neverSent(err)) {
		return decision{stop: NotIdempotent}
	}
	if !op.rewind(err) {
		return decision{stop: BodyNotRewindable}
	}

	now := op.clock.Now()
	// room is how long the wait may be so that MinAttemptTime is still
	// left after it; -1 when even a zero wait leaves too little. Without
	// a deadline there is no limit.
	room := maxDuration
	if op.hasDeadline {
		room = -1
		if left := op.deadline.Sub(now); left >= t.minAttemptTime() {
			room = left - t.minAttemptTime()
		}
	}
	jitter := t.jitter(backoffWindow(t.baseDelay(), t.maxDelay(), op.attempts-1))
	var d decision
	if server, ok := op.retryAfter(resp, now); ok {
		if server > room {
			return op.dropNextBody(RetryAfterExceedsDeadline)
		}
		if server > t.maxRetryAfter() {
			return op.dropNextBody(RetryAfterTooLong)
		}
		// The server's delay is a minimum; the jitter only spreads
		// clients, so it is what gets shortened when time is short.
		jitter = min(jitter, room-server, maxDuration-server)
		d = decision{wait: server + jitter}
	} else {
		if jitter > room {
			return op.dropNextBody(DeadlineExhausted)
		}
		d = decision{wait: jitter}
	}
	if !t.budget().Withdraw(op.ctx) {
		return op.dropNextBody(BudgetExhausted)
	}
	return d
}

// refund gives back the token withdrawn for a retry that will not be
// sent, when the budget can take it.
func (op *operation) refund() {
	op.t.budget().Refund()
}

// wait sleeps for d on the Clock, ending early when the operation's
// context ends, and then checks that the next attempt may still start. It
// returns a stop reason, or "" to go on.
func (op *operation) wait(d time.Duration) StopReason {
	if d > 0 {
		start := op.clock.Now()
		timer := op.clock.NewTimer(d)
		select {
		case <-timer.Chan():
		case <-op.ctx.Done():
			timer.Stop()
		}
		op.waited += op.clock.Since(start)
	}
	if op.callerEnded() {
		op.stopErr = op.callerErr()
		return Canceled
	}
	if op.hasDeadline && op.deadline.Sub(op.clock.Now()) < op.t.minAttemptTime() {
		// Scheduler delay, or the operation's own Timeout, left too little
		// time after the wait.
		return DeadlineExhausted
	}
	return ""
}
