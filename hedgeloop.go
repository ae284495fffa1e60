package httpretry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/httpretry/httpretry/internal/alarm"
	"github.com/httpretry/httpretry/internal/latency"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds the loop of a hedged operation. The first attempt runs
// on the caller's goroutine with an alarm armed for the hedge delay (see
// armFire); only when it rings first does the operation use goroutines:
// the one it rings on runs the loop, which sends each further attempt on a goroutine
// of its own, waits for the first of an attempt ending or the hedge delay
// passing, lets the pure rules of decide.go say what follows, and settles
// the losers once one attempt wins.

// panicValue holds what an attempt's goroutine recovered, even nil.
type panicValue struct{ v any }

// hedged is what a hedged operation adds to an operation: its attempts in
// flight, its hedge timer's state and what it reports.
type hedged struct {
	delay        time.Duration // the hedge delay, fixed for the operation
	finishLosers time.Duration // Hedging.FinishLosers
	flight       []*attempt    // the attempts in flight
	launched     time.Time     // when the last attempt started
	results      chan *attempt // where attempts go when they end
	noMoreHedges bool          // no new hedge is sent: the Budget or the Throttle refused one, no body could be made, or hedgeStops said so
	capped       bool          // the extra-load cap refused the pending hedge: asked again after the delay
	hedges       int           // hedges sent
	refused      int           // hedges refused
	losers       int           // attempts that lost
	// notBefore is the latest time a Retry-After of a discarded answer
	// asked the next attempt to wait for, when hasNotBefore: a retry
	// after the attempts in flight fail waits for it too.
	notBefore    time.Time
	hasNotBefore bool
	// settled is the part of the operation settled before its first
	// attempt that the attempts' goroutines read, in an operation of its
	// own, allocated with this: handing them the operation itself would
	// move every operation, hedged or not, from the stack to the heap.
	settled operation
	// first is the first attempt and inFlight the storage of flight for
	// as many attempts as most operations allow, allocated with this.
	first    attempt
	inFlight [4]*attempt
	// alarm (on the system clock) or fire (on a clock the caller gave)
	// is armed when the first attempt is sent on the caller's
	// goroutine: the operation belongs to the goroutine fired runs on if
	// it rings before the attempt ends. alarm is made once, with the
	// state, and kept by recycle, so that an entry of an earlier arming
	// left in hedgeAlarms is told from the current one. timer is the
	// loop's, armed only once the loop has a hedge or a retry to time.
	alarm *alarm.Alarm
	fire  clockwork.Timer
	timer clockwork.Timer
	// fireFn is fired, bound to h once, with alarm.
	fireFn func()
	// op is the operation itself, moved here from RoundTrip's stack.
	op operation
	// ready gets a value once the goroutine the hedge delay rang on has
	// made the channels the caller's goroutine hands the first attempt
	// over on, and waits for the verdict on: only a caller whose stopFire
	// failed waits for it, so an operation the hedge never fired for
	// touches it not. It is made once, with the state, and kept by
	// recycle.
	ready   chan struct{}
	verdict chan verdict
	// finishing are the losers settle left to finish, and signalled what
	// the winner said of the server, until letLosersFinish collects them.
	finishing []*attempt
	signalled bool
	// deferred is what the goroutine the hedge delay rang on needs to set
	// the operation up when the hedge fires while a first attempt sent
	// directly (see firstAttempt.sendHedged) runs: the operation is not
	// set up yet.
	deferred deferredSetUp
}

// deferredSetUp is what an operation whose first attempt was sent directly
// is set up from (see hedged.setUp).
type deferredSetUp struct {
	t    *Transport
	req  *http.Request
	base http.RoundTripper
	dest *throttle.Dest
	dist *latency.Dist
	// since is when the first attempt started, on the system clock,
	// as startClock read it; the attempt's start is then left zero
	// until the loop needs it (started).
	since time.Duration
}

// setHedging settles whether the operation learns latencies and whether it
// is hedged, after its request template is settled, unless its first
// attempt, sent directly, settled both (first).
func (op *operation) setHedging(outerOwns bool, first *firstAttempt) {
	if first.hedgingSettled {
		op.dist, op.h = first.dist, first.h
		return
	}
	if op.t.learns() {
		op.settleHedging(outerOwns)
	}
}

// settleHedging is setHedging's work when the Transport learns latencies,
// apart so that setHedging inlines.
func (op *operation) settleHedging(outerOwns bool) {
	t := op.t
	op.dist = t.latencyDist(op.req)
	if t.Hedging == nil || outerOwns || op.policy.maxAttempts < 2 {
		return
	}
	if delay, ok := t.Hedging.plan(op.dist, op.tmpl, op.idempotent, op.body.kind); ok {
		op.h = newHedged(t.Hedging, delay)
	}
}

// plan says whether an operation of req, with the latencies dist, is
// hedged, and after what delay: only a request safe to send twice at once
// (see hedgeSafe) with a body that can be made again, which deposits into
// the extra-load cap, and once a delay is known (fixed, or learned from
// enough samples).
func (h *Hedging) plan(dist *latency.Dist, req *http.Request, idempotent bool, body bodyKind) (time.Duration, bool) {
	byMethod := idempotentUnkeyed(req)
	keyed := !byMethod && hasIdempotencyKey(req.Header) // only asked when it decides
	if !hedgeSafe(idempotent, keyed, byMethod, h.Deduplicates, body == bodyNone || body == bodyGetBody) {
		return 0, false
	}
	dist.DepositExtra(hedgeHeadroom * h.maxExtraLoad())
	if h.Delay > 0 {
		return h.Delay, true
	}
	return dist.HedgeDelay(h.minSamples(), h.minDelay())
}

// newHedged returns the hedging state of an operation, from hedgedPool.
func newHedged(hg *Hedging, delay time.Duration) *hedged {
	h := hedgedPool.Get().(*hedged)
	if h.fireFn == nil {
		h.fireFn = h.fired // bound once, kept by recycle
		h.ready = make(chan struct{}, 1)
		h.alarm = new(alarm.Alarm)
	}
	h.delay, h.finishLosers = delay, hg.FinishLosers
	return h
}

// hedgedPool keeps the hedging states of operations that ended after one
// attempt, sent before the hedge fired: nothing refers to them then (see
// hedged.run), and their alarm, stopped, is armed again for the next.
var hedgedPool = sync.Pool{New: func() any { return new(hedged) }}

// recycle returns h to hedgedPool, as new but for its alarm, stopped or
// rung, and what is bound once.
func (h *hedged) recycle() {
	fireFn, ready := h.fireFn, h.ready
	*h = hedged{fireFn: fireFn, ready: ready, alarm: h.alarm}
	hedgedPool.Put(h)
}

// hedgeAlarms rings the hedge delays of every Transport on the system
// clock from one timer (see package alarm): an operation whose first
// attempt answers before its hedge delay, as most do, arms and stops an
// alarm, not a runtime timer of its own.
var hedgeAlarms = alarm.Set{Since: func() time.Duration { return time.Since(processStart) }}

// armFire arms the first attempt's hedge delay, from now, the time since
// processStart read as the attempt is about to be sent: on the system
// clock, h's alarm in hedgeAlarms; on a clock the caller gave, a timer of
// its own, from that clock's now.
func (h *hedged) armFire(t *Transport, clock clockwork.Clock, now time.Duration) {
	if t.Clock == nil {
		hedgeAlarms.Arm(h.alarm, now, h.delay, h.fireFn)
		return
	}
	h.fire = clock.AfterFunc(h.delay, h.fireFn)
}

// stopFire stops what armFire armed, and reports whether it did before
// the hedge delay rang: false when fired runs, or is about to.
func (h *hedged) stopFire() bool {
	if h.fire != nil {
		return h.fire.Stop()
	}
	return h.alarm.Stop()
}

// run runs a hedged operation to its end, on a copy of the operation
// held by h (op itself stays on RoundTrip's stack, which a goroutine
// cannot reach); what RoundTrip closes of the request body, and what a
// hook's panic gives back (the token and the quota request of an attempt
// not sent), go back to op when run returns.
//
// The first attempt is sent on the caller's goroutine, with an alarm
// armed for the hedge delay: an operation whose first attempt answers
// before it costs no goroutine and no channel. When the hedge delay rings
// first (see fired), the goroutine it rings on starts the hedge (each
// attempt but the first is sent on a goroutine of its own) and runs the
// loop from then on, while the caller's goroutine waits in Base for the first
// attempt, hands it to the loop, and waits for the loop's verdict. With
// FinishLosers the first attempt may outlive RoundTrip: it is sent on a
// goroutine of its own, as every other attempt.
func (h *hedged) run(op *operation, first *firstAttempt) (resp *http.Response, err error) {
	h.op = *op
	reuse := false
	defer func() {
		op.body, op.unsent, op.adm.ticket = h.op.body, h.op.unsent, h.op.adm.ticket
		if reuse {
			h.recycle()
		}
	}()
	o := &h.op
	h.shareSettled()
	if first.sent {
		// Sent directly, it answered before the hedge delay, an answer
		// that is not final: the loop takes it over.
		a := &h.first
		o.attempts, o.unsent, o.start = 1, holdsNothing, a.start
		a.resp, a.err = a.complete(&h.settled, a.req, first.resp, first.err)
		a.elapsed = first.elapsed
		resp, err = h.loop(o, a, false)
		reuse = o.attempts == 1
		return resp, err
	}
	h.flight = h.inFlight[:0]
	if h.keepsLosers() {
		return h.loop(o, nil, true)
	}
	a := &h.first
	o.open(a, false)
	h.launched = a.start
	h.flight = append(h.flight, a)
	// The delay counts from now, the first attempt about to be sent:
	// a.start may be the operation's, read before OnAttemptStart ran.
	h.armFire(o.t, o.clock, time.Since(processStart))
	a.sendRecovering(&h.settled, o.base)
	if h.stopFire() {
		// The first attempt ended before the hedge delay: the
		// operation goes on here, and no hedge fired. If it ends with
		// that attempt, no goroutine was started and nothing left
		// refers to h: the response's body releases the attempt's own
		// context, not h.
		resp, err = h.loop(o, a, false)
		reuse = o.attempts == 1
		return resp, err
	}
	// The hedge fired: the loop runs on the goroutine it rang on.
	<-h.ready
	h.results <- a
	v := <-h.verdict
	if v.panicked != nil {
		panic(v.panicked.v)
	}
	return v.resp, v.err
}

// shareSettled copies into h.settled the part of the operation settled before
// its first attempt that the attempts' goroutines read.
func (h *hedged) shareSettled() {
	o, s := &h.op, &h.settled
	s.t, s.req, s.clock, s.callerCtx, s.policy = o.t, o.req, o.clock, o.callerCtx, o.policy
	s.timed, s.idempotent, s.dist, s.adm.dest, s.body.kind = o.timed, o.idempotent, o.dist, o.adm.dest, o.body.kind
}

// verdict is what the loop, run on the goroutine the hedge delay rang on,
// hands back to the caller's goroutine: an answer, or the panic
// to raise there.
type verdict struct {
	resp     *http.Response
	err      error
	panicked *panicValue
}

// fired runs on the goroutine the hedge delay rang on, when it passed
// before the first attempt ended (the alarm could no longer be stopped): the
// operation is this goroutine's from then on. It makes the channels the
// loop needs, lets the caller's goroutine hand the first attempt over
// once it ends, and runs the loop, which sends the hedge at once; the
// loop's answer, or its panic, goes back to the caller's goroutine.
func (h *hedged) fired() {
	if h.deferred.t != nil {
		h.setUp()
	}
	h.results = make(chan *attempt, h.op.policy.maxAttempts)
	h.verdict = make(chan verdict, 1)
	h.ready <- struct{}{}
	defer func() {
		if p := recover(); p != nil {
			h.verdict <- verdict{panicked: &panicValue{p}}
		}
	}()
	resp, err := h.loop(&h.op, nil, false)
	h.verdict <- verdict{resp: resp, err: err}
}

// loop runs the operation until an attempt wins or it stops. It starts
// from first, the first attempt, when it ended before the hedge delay;
// else it sends the hedge now, or (with start, when the first attempt
// was not sent yet) the first attempt on its own goroutine.
func (h *hedged) loop(op *operation, first *attempt, start bool) (*http.Response, error) {
	defer h.stopTimer()
	defer h.endFlightOnPanic()
	if first != nil {
		if resp, err, end := h.attemptEnded(op, first); end {
			return resp, err
		}
	} else if start {
		h.launch(op, false)
		h.arm(op, h.delay)
	} else {
		h.hedgeNow(op)
	}
	ctxDone := op.ctx.Done()
	for {
		select {
		case a := <-h.results:
			resp, err, end := h.attemptEnded(op, a)
			if end {
				return resp, err
			}
		case <-h.timerChan():
			h.afterDelay(op)
		case <-ctxDone:
			// The attempts end with the operation's context, except
			// those that may be left to finish, which do not inherit it.
			ctxDone = nil
			if h.keepsLosers() {
				h.cancelFlight()
			}
		}
	}
}

// arm sets the loop's hedge timer to fire after d, making it the first
// time.
func (h *hedged) arm(op *operation, d time.Duration) {
	if h.timer == nil {
		h.timer = op.clock.NewTimer(d)
		return
	}
	h.timer.Reset(d)
}

// timerChan is the loop's hedge timer's channel, nil (never ready) when
// it was never armed.
func (h *hedged) timerChan() <-chan time.Time {
	if h.timer == nil {
		return nil
	}
	return h.timer.Chan()
}

// stopTimer stops the loop's hedge timer, if it was ever armed.
func (h *hedged) stopTimer() {
	if h.timer != nil {
		h.timer.Stop()
	}
}

// keepsLosers reports whether losers are left to finish (FinishLosers),
// so that every attempt is sent on its own goroutine, without the
// operation's context; false for a sequential operation (nil h).
func (h *hedged) keepsLosers() bool {
	return h != nil && h.finishLosers > 0
}

// sendRecovering sends the first attempt on the caller's goroutine, as
// run sends another on its own: a panic of Base is kept in a.panicked, for
// the loop to end the other attempts before it is raised again.
func (a *attempt) sendRecovering(op *operation, base http.RoundTripper) {
	defer func() {
		if p := recover(); p != nil {
			a.panicked = &panicValue{p}
		}
	}()
	a.send(op, base)
}

// endFlightOnPanic ends every attempt still in flight when a hook
// (OnAttempt, Transient, Logger's handler) panics on the goroutine running
// the loop, as a panicking Base does: each is canceled, waited for, told
// to the Throttle as ended without an answer, and its response drained
// and closed; then the panic goes on (to the
// caller's goroutine, when the loop runs on the timer's).
func (h *hedged) endFlightOnPanic() {
	if len(h.flight) == 0 {
		return
	}
	p := recover()
	if p == nil {
		return
	}
	h.cancelFlight()
	for range h.flight {
		a := <-h.results
		a.recordUnheard(&h.op)
		if a.panicked == nil {
			a.discard()
		} else {
			a.end()
		}
	}
	h.flight = nil
	panic(p)
}

// launch starts an attempt on its own goroutine. A hedge goes to
// Hedging.Base when set. It reports false when no body could be made for
// a hedge; the first attempt sends the template's, and a retry the one
// decideRetry made for it.
func (h *hedged) launch(op *operation, hedge bool) bool {
	if hedge && op.body.kind == bodyGetBody && op.body.next == nil && !op.body.fresh(op.tmpl) {
		return false
	}
	a := new(attempt)
	op.open(a, hedge)
	h.launched = a.start
	base := op.base
	if hedge {
		h.hedges++
		if hb := op.t.Hedging.Base; hb != nil {
			base = hb
		}
	}
	h.flight = append(h.flight, a)
	if h.results == nil {
		h.results = make(chan *attempt, op.policy.maxAttempts)
	}
	go a.run(&h.settled, base, h.results)
	return true
}

// run sends the attempt and hands it to the loop when it ends. It writes
// only to a. A panic of Base is handed over too, for the loop to raise
// (on the caller's goroutine in the end), as a sequential attempt would.
func (a *attempt) run(op *operation, base http.RoundTripper, done chan<- *attempt) {
	defer func() {
		if p := recover(); p != nil {
			a.panicked = &panicValue{p}
			done <- a
		}
	}()
	a.send(op, base)
	done <- a
}

// attemptEnded handles an attempt that ended, on the one path every attempt
// takes (operation.assess): it wins, it leaves the others running (and
// may start the next at once), or, when it was the last in flight, the
// operation goes on as a sequential one does, with a retry after a wait
// (operation.stopOrWait). end says the operation is over, with resp and
// err.
func (h *hedged) attemptEnded(op *operation, a *attempt) (resp *http.Response, err error, end bool) {
	h.remove(a)
	if a.panicked != nil {
		a.recordUnheard(op)
		a.end()
		h.settle(op, a, true) // a loser's panic after this one is not raised: this one is
		h.letLosersFinish()
		panic(a.panicked.v)
	}
	defer a.releaseOnPanic(op)
	r, stop := op.assess(a)
	f := hedgeFacts{stop: stop, inFlight: len(h.flight), inProgress: inProgressConflict(a.resp),
		mayStart: h.mayHedge(op), hedgeError: a.hedge && a.err != nil}
	h.noMoreHedges = h.noMoreHedges || hedgeStops(f)
	switch afterAttempt(f) {
	case hedgeWin:
		return h.win(op, a, stop)
	case hedgeNow:
		h.setAside(op, a)
		h.hedgeNow(op)
	case hedgeKeep:
		h.setAside(op, a)
	case hedgeRetry:
		if resp, err, end := op.stopOrWait(a, &r, stop); end {
			return resp, err, true
		}
		h.launch(op, false)
		h.arm(op, h.delay)
	}
	return nil, nil, false
}

// setAside reports an attempt whose failure leaves others running, keeps
// the Retry-After its answer carried for the copies that follow, and
// discards the answer off the caller's path: its body is drained (within
// drain's bounds) and the attempt released on a goroutine of their own,
// so that an answer arriving meanwhile is not held up by a discarded
// body that trickles.
func (h *hedged) setAside(op *operation, a *attempt) {
	a.report(op, decision{})
	now := op.clock.Now()
	if d, ok := serverDelay(a.resp, now); ok {
		h.notBefore, h.hasNotBefore = latestNotBefore(h.notBefore, h.hasNotBefore, now.Add(d)), true
	}
	if a.resp == nil {
		a.end()
		return
	}
	resp := a.resp
	a.resp = nil // the drain's from now on
	go func() {
		drain(resp)
		a.end()
	}()
}

// releaseOnPanic drains and closes the response of attempt a, received
// by the loop and not yet handed on, and releases the attempt, when a hook
// panics on the caller's goroutine meanwhile, telling the Throttle of it
// if the hook ran first; then the panic goes on.
func (a *attempt) releaseOnPanic(op *operation) {
	if p := recover(); p != nil {
		a.recordUnheard(op)
		a.discard()
		panic(p)
	}
}

// win returns the winner's answer once the losers are settled.
func (h *hedged) win(op *operation, a *attempt, stop StopReason) (*http.Response, error, bool) {
	a.report(op, decision{})
	// An operation its caller ended has no winner: the attempts still
	// running end for the caller too, and none lost to another.
	if p := h.settle(op, a, stop != Canceled); p != nil {
		// A loser panicked: raised as if it had ended first, and the
		// winner's answer goes unread.
		a.discard()
		a.resp = nil // closed: nothing is left of it to close
		panic(p.v)
	}
	defer h.letLosersFinish()
	h.bindWinner(op.ctx, a)
	resp, err := op.finish(a, a.resp, stop)
	return resp, err, true
}

// letLosersFinish starts the goroutine that collects the losers left to
// finish, if settle left any, once the operation's own hooks have run:
// the Transient calls it makes for them never overlap the operation's.
func (h *hedged) letLosersFinish() {
	if h.finishing != nil {
		go collectLosers(&h.settled, h.finishing, h.results, h.finishLosers, h.signalled)
		h.finishing = nil
	}
}

// bindWinner ties the winner to the operation's context ctx again when
// losers may finish: every attempt was sent without the operation's
// cancel, so that losers outlive it, but only losers may. The winner's
// body then ends when the caller cancels, as without FinishLosers;
// releasing the attempt releases the link.
func (h *hedged) bindWinner(ctx context.Context, a *attempt) {
	if !h.keepsLosers() || a.cancelAttempt == nil {
		return
	}
	c := a.cancelAttempt
	unlink := context.AfterFunc(ctx, c.cancel)
	a.cancelAttempt = cancelFunc(func() {
		unlink()
		c.cancel()
	})
}

// afterDelay starts a hedge when the delay passed with no answer. A
// timer that fired for an earlier attempt (a retry started since) is set
// again for the time the delay still has to run.
func (h *hedged) afterDelay(op *operation) {
	if len(h.flight) == 0 {
		return
	}
	if rest := h.delay - op.clock.Since(h.launched); rest > 0 {
		h.arm(op, rest)
		return
	}
	h.hedgeNow(op)
}

// hedgeNow sends a hedge if the extra-load cap and the budget allow it,
// and restarts the delay from it. A hedge the cap refuses is asked for
// again after the delay, as the cap refills with every operation; one
// the Budget refuses ends hedging for the operation. Neither ends the
// attempts in flight.
func (h *hedged) hedgeNow(op *operation) {
	if h.hasNotBefore {
		if rest := h.notBefore.Sub(op.clock.Now()); rest > 0 {
			// A Retry-After an earlier answer carried is a minimum
			// for every copy that follows, hedges as retries.
			h.arm(op, rest)
			return
		}
	}
	if !h.mayHedge(op) {
		return
	}
	switch h.withdraw(op) {
	case hedgeCapped:
		if !h.capped {
			h.refuse(op)
		}
		h.capped = true
		h.arm(op, h.delay)
		return
	case hedgeOverBudget, hedgeThrottled:
		h.refuse(op)
		h.noMoreHedges = true
		return
	}
	h.capped = false
	op.unsent = holdsHedge
	if !h.launch(op, true) {
		// No body for it: as good as refused.
		op.unsent.giveBack(op.budget, &op.adm.ticket, op.dist)
		op.unsent = holdsNothing
		h.noMoreHedges = true
		return
	}
	h.log(op, "httpretry: hedge", slog.LevelInfo, op.attempts)
	h.arm(op, h.delay)
}

// refuse counts and logs a refused hedge. The record is at Debug level:
// when a whole server slows down, every operation asks for a hedge the
// cap refuses, and a record each would flood the log; the refusal is
// counted in Outcome.HedgesRefused.
func (h *hedged) refuse(op *operation) {
	h.refused++
	h.log(op, "httpretry: hedge refused", slog.LevelDebug, op.attempts+1)
}

// What withdraw found.
const (
	hedgeGranted    = iota
	hedgeCapped     // the extra-load cap had no token
	hedgeOverBudget // the Budget refused its token
	hedgeThrottled  // the Throttle refused it, as it would a retry
)

// withdraw asks the Throttle, if any, as for a retry, then takes a token
// from the extra-load cap, one from the budget and a request from the
// destination's known quota, all or none.
func (h *hedged) withdraw(op *operation) int {
	if !op.adm.mayRetry(op.t.Throttle, op.clock) {
		return hedgeThrottled
	}
	if !op.dist.WithdrawExtra() {
		return hedgeCapped
	}
	if !h.withdrawAfterExtra(op) {
		return hedgeOverBudget
	}
	if _, ok := op.adm.take(op.t.Throttle, op.req, op.clock); !ok {
		// The destination's quota is spent: a hedge would meet a 429.
		op.dist.RefundExtra()
		op.budget.Refund()
		return hedgeThrottled
	}
	return hedgeGranted
}

// withdrawAfterExtra takes a hedge's token from the budget once its
// extra-load token is taken, and gives the extra-load token back when the
// budget refuses, or when it panics: the hedge is then never sent.
func (h *hedged) withdrawAfterExtra(op *operation) (ok bool) {
	defer func() {
		if !ok {
			op.dist.RefundExtra()
		}
	}()
	return op.budget.Withdraw(op.ctx)
}

// mayHedge applies the rule of mayStartHedge to the operation now. An
// operation whose context has ended starts nothing more: it counts as
// refused.
func (h *hedged) mayHedge(op *operation) bool {
	left, bounded := time.Duration(0), op.hasDeadline
	if bounded {
		left = op.deadline.Sub(op.clock.Now())
	}
	return mayStartHedge(op.policy, op.attempts, h.noMoreHedges || done(op.ctx), left, bounded)
}

// remove takes a out of the attempts in flight.
func (h *hedged) remove(a *attempt) {
	for i, f := range h.flight {
		if f == a {
			h.flight = append(h.flight[:i], h.flight[i+1:]...)
			return
		}
	}
}

// cancelFlight cancels every attempt in flight.
func (h *hedged) cancelFlight() {
	for _, a := range h.flight {
		a.cancelAttempt.cancel()
	}
}

// settle ends the losers: each is canceled, waited for, reported and its
// response drained and closed, so that the winner is returned only once
// nothing else of the operation runs. It returns the first panic a loser
// raised, for the caller's goroutine to raise again. With FinishLosers
// they are left to finish for that long instead, on a goroutine of their
// own, and their panics are logged there (see collectLosers). w is the
// attempt that won, or panicked; lost is false when no attempt won, the
// caller having ended the operation: the others are then ended and
// reported as the caller's, never as losers.
func (h *hedged) settle(op *operation, w *attempt, lost bool) *panicValue {
	if len(h.flight) == 0 {
		return nil
	}
	if lost {
		h.losers += len(h.flight)
	}
	// What the winner said of the server, for the losers canceled for
	// it.
	signalled := (w.resp != nil || w.err != nil) && overloadSignal(w.resp, w.err)
	if h.keepsLosers() && lost {
		for _, a := range h.flight {
			// Only what was settled before its goroutine started: the
			// rest of a is still being written.
			lost := &attempt{number: a.number, hedge: a.hedge, start: a.start,
				elapsed: op.clock.Since(a.start), canceled: true}
			lost.report(op, decision{})
		}
		h.finishing, h.signalled = h.flight, signalled
		h.flight = nil
		return nil
	}
	h.cancelFlight()
	var first *panicValue
	for len(h.flight) > 0 {
		// Each leaves the flight as it is received: a hook that panics
		// while one is reported leaves only the others to wait for.
		a := <-h.results
		h.remove(a)
		if a.panicked != nil {
			first = cmp.Or(first, a.panicked)
			a.recordUnheard(op)
			a.end()
			continue
		}
		h.settleLoser(op, a, signalled, lost)
	}
	return first
}

// settleLoser reports an attempt received after it was canceled, a loser
// when lost, and releases it, even when a hook panics while it is
// reported. One the caller ended teaches no latency, as in a sequential
// operation.
func (h *hedged) settleLoser(op *operation, a *attempt, signalled, lost bool) {
	defer a.releaseOnPanic(op)
	if lost {
		a.err = asLost(a.err)
		a.learnLost(op.t, op.dist)
		a.canceled = true
	}
	op.recordLoser(a, signalled)
	a.report(op, decision{})
	a.discard()
}

// collectLosers waits for losers left to finish, for at most grace, then
// cancels those still running. RoundTrip has returned by then, so a
// loser's panic cannot be raised on the caller's goroutine: it is logged
// at Error level instead, never swallowed silently, and raising it here
// would end the whole process for an answer nobody waits for.
func collectLosers(op *operation, losers []*attempt, results <-chan *attempt, grace time.Duration, signalled bool) {
	timer := op.clock.AfterFunc(grace, func() {
		for _, a := range losers {
			a.cancelAttempt.cancel()
		}
	})
	defer timer.Stop()
	for range losers {
		a := <-results
		if a.panicked != nil {
			a.logPanic(op)
			a.recordUnheard(op)
			a.end()
			continue
		}
		a.err = asLost(a.err)
		a.learnLost(op.t, op.dist)
		op.recordLoser(a, signalled)
		a.discard()
		if a.trace != nil {
			a.trace.release()
		}
	}
}

// learnLost records the latency of an attempt that lost, as the rule of
// latencySample says: a good answer it had first, or at least the time it
// ran when it was canceled. A loser that answered was not judged yet:
// Transient is asked now, once.
func (a *attempt) learnLost(t *Transport, dist *latency.Dist) {
	if dist == nil {
		return
	}
	if a.resp != nil {
		a.transient = t.transient(a.resp, a.err)
	}
	cut := errors.Is(a.err, context.Canceled) || errors.Is(a.err, ErrAttemptTimeout)
	if record, censored := latencySample(goodAnswer(a.status, a.transient), cut); record && dist.Times() {
		dist.Record(a.elapsed, censored, a.start)
	}
}

// learn records the latency of an attempt that ended on its own, judged
// by Transient already, as the rule of latencySample says.
func (a *attempt) learn(dist *latency.Dist) {
	if dist != nil {
		a.learnInto(dist)
	}
}

// learnInto is learn's work when latencies are learned, apart so that
// learn inlines.
func (a *attempt) learnInto(dist *latency.Dist) {
	if record, censored := a.sample(); record && dist.Times() {
		dist.Record(a.elapsed, censored, a.start)
	}
}

// sample says whether the latency of a, which ended on its own, judged
// by Transient already, is a sample, and whether it is censored (see
// latencySample).
func (a *attempt) sample() (record, censored bool) {
	return latencySample(goodAnswer(a.status, a.transient), errors.Is(a.err, ErrAttemptTimeout))
}

// log records a hedge sent or refused, naming the hedge's attempt number
// and the delay after which it was due.
func (h *hedged) log(op *operation, msg string, level slog.Level, number int) {
	if op.t.Logger == nil {
		return
	}
	attrs := requestAttrs(op, 6)
	attrs = append(attrs, slog.Int("attempt", number), slog.Duration("delay", h.delay))
	if op.hasDeadline {
		attrs = append(attrs, slog.Duration("time_left", op.deadline.Sub(op.clock.Now())))
	}
	op.t.Logger.LogAttrs(op.callerCtx, level, msg, attrs...)
}

// logPanic records the panic of a loser left to finish after RoundTrip
// returned. The panic's value may hold anything Base put in it, a URL
// with a token included: only its type is logged.
func (a *attempt) logPanic(op *operation) {
	if op.t.Logger == nil {
		return
	}
	attrs := requestAttrs(op, 5)
	attrs = append(attrs, slog.Int("attempt", a.number), slog.String("panic_type", fmt.Sprintf("%T", a.panicked.v)))
	op.t.Logger.LogAttrs(context.Background(), slog.LevelError, "httpretry: loser panicked after return", attrs...)
}
