package httpretry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/httpretry/httpretry/internal/latency"
	"github.com/jonboulle/clockwork"
)

// This file holds the loop of a hedged operation: attempts run on their own
// goroutines, the loop waits for the first of an attempt ending or the
// hedge delay passing, lets the pure rules of decide.go say what follows,
// and settles the losers once one attempt wins.

// panicValue holds what an attempt's goroutine recovered, even nil.
type panicValue struct{ v any }

// hedged is what a hedged operation adds to an operation: its attempts in
// flight and what it reports.
type hedged struct {
	hedging      bool          // the operation is hedged
	dist         *latency.Dist // the latencies of the request's key; nil when not learned
	delay        time.Duration // the hedge delay, fixed for the operation
	finishLosers time.Duration // Hedging.FinishLosers
	flight       []*attempt    // the attempts in flight
	launched     time.Time     // when the last attempt started
	results      chan *attempt // where attempts go when they end
	refusedOnce  bool          // the Budget refused a hedge: no new one is sent
	capped       bool          // the extra-load cap refused the pending hedge: asked again after the delay
	hedges       int           // hedges sent
	refused      int           // hedges refused
	losers       int           // attempts that lost
	// notBefore is the latest time a Retry-After of a discarded answer
	// asked the next attempt to wait for, when hasNotBefore: a retry
	// after the attempts in flight fail waits for it too.
	notBefore    time.Time
	hasNotBefore bool
	// settled is a copy of the operation as it was settled before its
	// first attempt, for the attempts' goroutines, which only read it:
	// handing them the operation itself would move every operation, hedged
	// or not, from the stack to the heap.
	settled *operation
}

// setHedging settles whether the operation learns latencies and whether it
// is hedged, after its request template is settled.
func (op *operation) setHedging(owned bool) {
	if op.t.learns() {
		op.settleHedging(owned)
	}
}

// settleHedging is setHedging's work when the Transport learns latencies,
// apart so that setHedging inlines.
func (op *operation) settleHedging(owned bool) {
	t := op.t
	op.dist = t.latencies().Lookup(t.latencyKey(op.req))
	h := t.Hedging
	if h == nil || owned || op.policy.maxAttempts < 2 {
		return
	}
	safe := hedgeSafe(op.idempotent, hasIdempotencyKey(op.tmpl.Header),
		idempotentMethod(op.tmpl), h.Deduplicates, op.body == bodyNone || op.body == bodyGetBody)
	if !safe {
		return
	}
	op.dist.DepositExtra(hedgeHeadroom * h.maxExtraLoad())
	delay, ok := h.Delay, h.Delay > 0
	if !ok {
		delay, ok = op.dist.HedgeDelay(h.minSamples(), h.minDelay())
	}
	op.hedging, op.delay, op.finishLosers = ok, delay, h.FinishLosers
}

// idempotentMethod reports whether req is safe to repeat by its method, or
// by its context's mark, rather than by an idempotency key.
func idempotentMethod(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return markedIdempotent(req.Context())
}

// runHedged runs a hedged operation to its end.
func (op *operation) runHedged() (*http.Response, error) {
	op.flight = make([]*attempt, 0, op.policy.maxAttempts)
	op.results = make(chan *attempt, op.policy.maxAttempts)
	op.settled = new(operation)
	*op.settled = *op
	defer op.endFlightOnPanic()
	op.launch(false)
	timer := op.clock.NewTimer(op.delay)
	defer timer.Stop()
	ctxDone := op.ctx.Done()
	for {
		select {
		case a := <-op.results:
			resp, err, end := op.ended(a, timer)
			if end {
				return resp, err
			}
		case <-timer.Chan():
			op.hedgeAfterDelay(timer)
		case <-ctxDone:
			// The attempts end with the operation's context, except
			// those that may be left to finish, which do not inherit it.
			ctxDone = nil
			if op.finishLosers > 0 {
				op.cancelFlight()
			}
		}
	}
}

// endFlightOnPanic ends every attempt still in flight when a hook
// (OnAttempt, Transient, Logger's handler) panics on the caller's
// goroutine, as a panicking Base does: each is canceled, waited for, and
// its response drained and closed; then the panic goes on.
func (op *operation) endFlightOnPanic() {
	if len(op.flight) == 0 {
		return
	}
	p := recover()
	if p == nil {
		return
	}
	op.cancelFlight()
	for range op.flight {
		a := <-op.results
		if a.panicked == nil {
			releaseLoser(a)
		} else {
			a.end()
		}
	}
	op.flight = nil
	panic(p)
}

// launch starts an attempt on its own goroutine. A hedge goes to
// Hedging.Base when set. It reports false when no body could be made for
// it.
func (op *operation) launch(hedge bool) bool {
	if op.attempts > 0 && op.body == bodyGetBody && op.nextBody == nil && !op.getBody() {
		return false
	}
	op.attempts++
	op.launched = op.clock.Now()
	op.attempt = attempt{number: op.attempts, hedge: hedge, lastStart: op.launched}
	if op.t.OnAttemptStart != nil {
		op.t.OnAttemptStart(op.req, op.attempts)
	}
	req := op.attemptRequest()
	op.ownsBody = false // Base owns whatever body it was handed
	a := new(attempt)
	*a = op.attempt
	a.req = req
	base := op.base
	if hedge {
		op.hedges++
		if hb := op.t.Hedging.Base; hb != nil {
			base = hb
		}
	}
	op.flight = append(op.flight, a)
	go a.run(op.settled, base, op.results)
	return true
}

// run sends the attempt and hands it to the loop when it ends. It writes
// only to a. A panic of Base is handed over too, for the loop to raise on
// the caller's goroutine, as a sequential attempt would.
func (a *attempt) run(op *operation, base http.RoundTripper, done chan<- *attempt) {
	defer func() {
		if p := recover(); p != nil {
			a.panicked = &panicValue{p}
			done <- a
		}
	}()
	resp, err := base.RoundTrip(a.req)
	resp, err = normalize(base, a.req, resp, err)
	a.resp, a.err = a.complete(op, a.req, resp, err)
	a.lastElapsed = op.clock.Since(a.lastStart)
	done <- a
}

// ended handles an attempt that ended: it wins, it leaves the others
// running (and may start the next at once), or, when it was the last in
// flight, the operation goes on as a sequential one would, with a retry
// after a wait. end says the operation is over, with resp and err.
func (op *operation) ended(a *attempt, timer clockwork.Timer) (resp *http.Response, err error, end bool) {
	op.remove(a)
	if a.panicked != nil {
		a.end()
		op.settle() // a loser's panic after this one is not raised: this one is
		panic(a.panicked.v)
	}
	// Transient is asked once per attempt, here; the rules, the
	// latency and the report read its answer.
	a.transient = op.t.transient(a.resp, a.err)
	op.attempt = *a
	op.recordAttempt(a.resp, a.err)
	op.learn(a)
	var r facts
	op.gather(&r, a.resp, a.err)
	stop := eligible(&op.policy, &r)
	f := hedgeFacts{stop: stop, inFlight: len(op.flight), inProgress: a.resp != nil && a.resp.StatusCode == http.StatusConflict && keyInProgress(a.resp),
		mayStart: op.mayHedge(), hedgeError: a.hedge && a.err != nil}
	op.refusedOnce = op.refusedOnce || hedgeStops(f)
	switch afterAttempt(f) {
	case hedgeWin:
		return op.win(a, stop)
	case hedgeNow:
		op.setAside(a)
		op.hedgeNow(timer)
	case hedgeKeep:
		op.setAside(a)
	case hedgeRetry:
		return op.retryHedged(a, timer)
	}
	return nil, nil, false
}

// setAside reports an attempt whose failure leaves others running, keeps
// the Retry-After its answer carried for the copies that follow, and
// discards the answer off the caller's path: its body is drained (within
// drain's bounds) and the attempt released on a goroutine of their own,
// so that an answer arriving meanwhile is not held up by a discarded
// body that trickles.
func (op *operation) setAside(a *attempt) {
	op.onAttempt(decision{})
	now := op.clock.Now()
	if d, ok := op.retryAfter(a.resp, now); ok {
		op.notBefore, op.hasNotBefore = latestNotBefore(op.notBefore, op.hasNotBefore, now.Add(d)), true
	}
	if a.resp == nil {
		op.endAttempt()
		return
	}
	go releaseLoser(a)
}

// win returns the winner's answer once the losers are settled.
func (op *operation) win(a *attempt, stop StopReason) (*http.Response, error, bool) {
	op.onAttempt(decision{})
	if p := op.settle(); p != nil {
		// A loser panicked: raised as if it had ended first, and the
		// winner's answer goes unread.
		releaseLoser(a)
		panic(p.v)
	}
	op.attempt = *a
	op.bindWinner()
	resp, err := op.finish(a.resp, stop)
	return resp, err, true
}

// bindWinner ties the winner to the operation's context again when losers
// may finish: every attempt was sent without the operation's cancel, so
// that losers outlive it, but only losers may. The winner's body then
// ends when the caller cancels, as without FinishLosers; releasing the
// attempt releases the link.
func (op *operation) bindWinner() {
	if op.finishLosers <= 0 || op.cancelAttempt == nil {
		return
	}
	cancel := op.cancelAttempt
	unlink := context.AfterFunc(op.ctx, cancel)
	op.cancelAttempt = func() {
		unlink()
		cancel()
	}
}

// retryHedged goes on after the last attempt in flight failed, as the
// sequential loop does: decide, wait, and send a retry, which may be
// hedged in turn.
func (op *operation) retryHedged(a *attempt, timer clockwork.Timer) (*http.Response, error, bool) {
	d := op.decide(a.resp, a.err)
	op.onAttempt(d)
	if d.stop != "" {
		resp, err := op.finish(a.resp, d.stop)
		return resp, err, true
	}
	op.logRetry(d)
	op.discard(a.resp)
	if reason := op.wait(); reason != "" {
		op.budget.Refund()
		resp, err := op.finish(nil, reason)
		return resp, err, true
	}
	if !op.launch(false) {
		resp, err := op.finish(nil, BodyNotRewindable)
		return resp, err, true
	}
	timer.Reset(op.delay)
	return nil, nil, false
}

// hedgeAfterDelay starts a hedge when the delay passed with no answer.
// A timer that fired for an earlier attempt (a retry started since) is
// set again for the time the delay still has to run.
func (op *operation) hedgeAfterDelay(timer clockwork.Timer) {
	if len(op.flight) == 0 {
		return
	}
	if rest := op.delay - op.clock.Since(op.launched); rest > 0 {
		timer.Reset(rest)
		return
	}
	op.hedgeNow(timer)
}

// hedgeNow sends a hedge if the extra-load cap and the budget allow it,
// and restarts the delay from it. A hedge the cap refuses is asked for
// again after the delay, as the cap refills with every operation; one
// the Budget refuses ends hedging for the operation. Neither ends the
// attempts in flight.
func (op *operation) hedgeNow(timer clockwork.Timer) {
	if rest := op.untilNotBefore(); rest > 0 {
		// A Retry-After an earlier answer carried is a minimum for
		// every copy that follows, hedges as retries.
		timer.Reset(rest)
		return
	}
	if !op.mayHedge() {
		return
	}
	switch op.withdrawHedge() {
	case hedgeCapped:
		if !op.capped {
			op.refuseHedge()
		}
		op.capped = true
		timer.Reset(op.delay)
		return
	case hedgeOverBudget, hedgeThrottled:
		op.refuseHedge()
		op.refusedOnce = true
		return
	}
	op.capped = false
	if !op.launch(true) {
		// No body for it: as good as refused.
		op.budget.Refund()
		op.dist.RefundExtra()
		op.refundQuota()
		op.refusedOnce = true
		return
	}
	op.logHedge("httpretry: hedge", slog.LevelInfo, op.attempts)
	timer.Reset(op.delay)
}

// untilNotBefore is how long the next copy of the request must still wait
// for the latest Retry-After an answer of the operation carried; 0 when
// none is pending.
func (op *operation) untilNotBefore() time.Duration {
	if !op.hasNotBefore {
		return 0
	}
	return op.notBefore.Sub(op.clock.Now())
}

// refuseHedge counts and logs a refused hedge. The record is at Debug
// level: when a whole server slows down, every operation asks for a hedge
// the cap refuses, and a record each would flood the log; the refusal is
// counted in Outcome.HedgesRefused.
func (op *operation) refuseHedge() {
	op.refused++
	op.logHedge("httpretry: hedge refused", slog.LevelDebug, op.attempts+1)
}

// What withdrawHedge found.
const (
	hedgeGranted    = iota
	hedgeCapped     // the extra-load cap had no token
	hedgeOverBudget // the Budget refused its token
	hedgeThrottled  // the Throttle refused it, as it would a retry
)

// withdrawHedge asks the Throttle, if any, as for a retry, then takes a
// token from the extra-load cap, one from the budget and a request from
// the destination's known quota, all or none.
func (op *operation) withdrawHedge() int {
	if !op.admitRetry() {
		return hedgeThrottled
	}
	if !op.dist.WithdrawExtra() {
		return hedgeCapped
	}
	if !op.budget.Withdraw(op.ctx) {
		op.dist.RefundExtra()
		return hedgeOverBudget
	}
	if _, ok := op.takeQuota(); !ok {
		// The destination's quota is spent: a hedge would meet a 429.
		op.dist.RefundExtra()
		op.budget.Refund()
		return hedgeThrottled
	}
	return hedgeGranted
}

// mayHedge applies the rule of mayStartHedge to the operation now. An
// operation whose context has ended starts nothing more: it counts as
// refused.
func (op *operation) mayHedge() bool {
	left, bounded := time.Duration(0), op.hasDeadline
	if bounded {
		left = op.deadline.Sub(op.clock.Now())
	}
	return mayStartHedge(op.policy, op.attempts, op.refusedOnce || done(op.ctx), left, bounded)
}

// remove takes a out of the attempts in flight.
func (op *operation) remove(a *attempt) {
	for i, f := range op.flight {
		if f == a {
			op.flight = append(op.flight[:i], op.flight[i+1:]...)
			return
		}
	}
}

// cancelFlight cancels every attempt in flight.
func (op *operation) cancelFlight() {
	for _, a := range op.flight {
		a.cancelAttempt()
	}
}

// settle ends the losers: each is canceled, waited for, reported and its
// response drained and closed, so that the winner is returned only once
// nothing else of the operation runs. It returns the first panic a loser
// raised, for the caller's goroutine to raise again. With FinishLosers
// they are left to finish for that long instead, on a goroutine of their
// own, and their panics are logged there (see collectLosers).
func (op *operation) settle() *panicValue {
	if len(op.flight) == 0 {
		return nil
	}
	op.losers += len(op.flight)
	// What the winner (the attempt last ended) said of the server,
	// for the losers canceled for it.
	signalled := (op.resp != nil || op.err != nil) && overloadSignal(op.resp, op.err)
	if op.finishLosers > 0 {
		for _, a := range op.flight {
			// Only what was settled before its goroutine started: the
			// rest of a is still being written.
			op.reportLoser(&attempt{number: a.number, hedge: a.hedge, lastStart: a.lastStart,
				lastElapsed: op.clock.Since(a.lastStart)})
		}
		go collectLosers(op.settled, op.flight, op.results, op.finishLosers, signalled)
		op.flight = nil
		return nil
	}
	op.cancelFlight()
	var first *panicValue
	for len(op.flight) > 0 {
		// Each leaves the flight as it is received: a hook that panics
		// while one is reported leaves only the others to wait for.
		a := <-op.results
		op.remove(a)
		if a.panicked != nil {
			first = cmp.Or(first, a.panicked)
			a.end()
			continue
		}
		a.err = asLost(a.err)
		op.learnLoser(a)
		op.recordLoser(a, signalled)
		op.reportLoser(a)
		releaseLoser(a)
	}
	return first
}

// reportLoser reports a losing attempt to OnAttempt, and releases its
// trace.
func (op *operation) reportLoser(a *attempt) {
	op.attempt = *a
	op.canceled = true
	op.onAttempt(decision{})
}

// collectLosers waits for losers left to finish, for at most grace, then
// cancels those still running. RoundTrip has returned by then, so a
// loser's panic cannot be raised on the caller's goroutine: it is logged
// at Error level instead, never swallowed silently, and raising it here
// would end the whole process for an answer nobody waits for.
func collectLosers(op *operation, losers []*attempt, results <-chan *attempt, grace time.Duration, signalled bool) {
	timer := op.clock.AfterFunc(grace, func() {
		for _, a := range losers {
			a.cancelAttempt()
		}
	})
	defer timer.Stop()
	for range losers {
		a := <-results
		if a.panicked != nil {
			op.logLoserPanic(a)
			a.end()
			continue
		}
		a.err = asLost(a.err)
		op.learnLoser(a)
		op.recordLoser(a, signalled)
		releaseLoser(a)
		if a.trace != nil {
			a.trace.release()
		}
	}
}

// releaseLoser drains and closes a loser's response and releases its
// context.
func releaseLoser(a *attempt) {
	if a.resp != nil {
		drain(a.resp)
	}
	a.end()
}

// learnLoser records a loser's latency, as the rule of latencySample
// says: a good answer it had first, or at least the time it ran when it
// was canceled. A loser that answered was not judged yet: Transient is
// asked now, once.
func (op *operation) learnLoser(a *attempt) {
	if op.dist == nil {
		return
	}
	if a.resp != nil {
		a.transient = op.t.transient(a.resp, a.err)
	}
	cut := errors.Is(a.err, context.Canceled) || errors.Is(a.err, ErrAttemptTimeout)
	if record, censored := latencySample(goodAnswer(a.status, a.transient), cut); record {
		op.dist.Record(a.lastElapsed, censored)
	}
}

// learn records the latency of an attempt that ended on its own, judged
// by Transient already, as the rule of latencySample says.
func (op *operation) learn(a *attempt) {
	if op.dist == nil {
		return
	}
	if record, censored := latencySample(goodAnswer(a.status, a.transient), errors.Is(a.err, ErrAttemptTimeout)); record {
		op.dist.Record(a.lastElapsed, censored)
	}
}

// logHedge records a hedge sent or refused, naming the hedge's attempt
// number and the delay after which it was due.
func (op *operation) logHedge(msg string, level slog.Level, number int) {
	if op.t.Logger == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("method", op.method()), slog.String("host", op.host()))
	if op.t.LogRoute != nil {
		attrs = append(attrs, slog.String("route", op.t.LogRoute(op.req)))
	}
	attrs = append(attrs, slog.Int("attempt", number), slog.Duration("delay", op.delay))
	if op.hasDeadline {
		attrs = append(attrs, slog.Duration("time_left", op.deadline.Sub(op.clock.Now())))
	}
	op.t.Logger.LogAttrs(op.callerCtx, level, msg, attrs...)
}

// logLoserPanic records the panic of a loser left to finish after
// RoundTrip returned. The panic's value may hold anything Base put in it,
// a URL with a token included: only its type is logged.
func (op *operation) logLoserPanic(a *attempt) {
	if op.t.Logger == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("method", op.method()), slog.String("host", op.host()))
	if op.t.LogRoute != nil {
		attrs = append(attrs, slog.String("route", op.t.LogRoute(op.req)))
	}
	attrs = append(attrs, slog.Int("attempt", a.number), slog.String("panic_type", fmt.Sprintf("%T", a.panicked.v)))
	op.t.Logger.LogAttrs(context.Background(), slog.LevelError, "httpretry: loser panicked after return", attrs...)
}
