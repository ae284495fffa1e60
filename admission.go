package httpretry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/httpretry/httpretry/internal/overload"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds the glue between the loop and the Throttle: what the
// operation asks before its first attempt and before each retry or hedge,
// what it tells after each attempt, and the waits WaitQuota asks for. The
// Throttle sees data only (a request, a time, a throttle.Result); what
// counts as overload and a 429's Retry-After are decided here.

// admission is what an operation holds of its Throttle: its destination's
// state and the request last taken from the destination's quota.
type admission struct {
	dest   *throttle.Dest // nil without a Throttle
	ticket throttle.Ticket
}

// mayRetry asks the Throttle th, if any, whether a retry or a hedge may be
// sent: its draw alone.
func (ad *admission) mayRetry(th *throttle.Throttle, clock clockwork.Clock) bool {
	return ad.dest == nil || th.AdmitRetry(ad.dest, clock) == nil
}

// take takes a request from the destination's known quota for a retry or
// a hedge about to be sent, and reports false, with the quota's reset,
// when it is spent. Without a Throttle it takes nothing.
func (ad *admission) take(th *throttle.Throttle, req *http.Request, clock clockwork.Clock) (time.Time, bool) {
	ad.ticket = throttle.Ticket{}
	if ad.dest == nil {
		return time.Time{}, true
	}
	ticket, reset, ok := th.TakeQuota(ad.dest, req, clock)
	ad.ticket = ticket
	return reset, ok
}

// throttle asks the Transport's Throttle whether the operation may start,
// before its first attempt. With WaitQuota, an operation whose quota is
// spent waits for the reset when it comes within MaxRetryAfter and leaves
// MinAttemptTime before the deadline, and is then asked again, held
// again while the next reset (or, during a paced release, the next
// turn) fits; the wait ends, refused, with the operation's context or
// the request's Cancel channel. The destination's state is looked up
// once per operation: a first attempt sent directly looked it up, and,
// sent, was admitted as an idle destination's.
func (op *operation) throttle(first *firstAttempt) error {
	th := op.t.Throttle
	if th == nil {
		return nil
	}
	op.adm.dest = first.dest
	if op.adm.dest == nil {
		op.adm.dest = th.Dest(op.req)
	}
	if first.sent {
		return nil
	}
	return op.admitFirst(th)
}

// admitFirst is throttle's work for a first attempt not sent yet.
func (op *operation) admitFirst(th *throttle.Throttle) error {
	if op.adm.dest.Idle() || done(op.callerCtx) {
		// A caller that already left (an errgroup whose sibling failed)
		// takes nothing from the quota: its attempt is never sent.
		return nil
	}
	if !op.timed && op.adm.dest.QuotaKnown() {
		// An answer's quota is placed in time from when its attempt
		// was sent: attempts read the clock.
		op.timed, op.start = true, op.clock.Now()
	}
	var reset time.Time
	var err error
	op.adm.ticket, reset, err = th.Admit(op.adm.dest, op.req, op.clock)
	slept := false
	for err == throttle.ErrQuotaExhausted && th.WaitQuota {
		waited, s := op.waitForQuota(reset)
		slept = slept || s
		if !waited {
			break
		}
		op.adm.ticket, reset, err = th.Admit(op.adm.dest, op.req, op.clock)
	}
	if slept && op.t.OnWait != nil {
		// Nothing was waited before the first attempt but this: all of
		// the operation's waits so far, and all of it the server's.
		op.t.OnWait(op.req, Wait{Waited: op.waited, RetryAfter: op.waited})
	}
	return err
}

// waitForQuota waits, with WaitQuota, until a spent quota resets at
// reset, when mayWaitFor allows it; for a reset already past, while the
// operations held for an ended pause are let go one at a time, until
// the next may ask (throttle.Throttle.QuotaReleased). It reports whether
// it waited until then (false when it did not wait, or the wait ended
// with the operation's context or the request's Cancel channel), and
// whether it slept at all; the time slept, cut short or not, is the
// operation's.
func (op *operation) waitForQuota(reset time.Time) (waited, slept bool) {
	now := op.clock.Now()
	if !op.t.Throttle.WaitQuota || !mayWaitFor(op.policy, op.deadline, op.hasDeadline, reset, now) {
		return false, false
	}
	var turn <-chan struct{}
	var tick <-chan time.Time
	if !reset.After(now) {
		if turn = op.t.Throttle.QuotaReleased(op.adm.dest); turn == nil {
			return true, false
		}
	} else {
		timer := op.clock.NewTimer(reset.Sub(now))
		defer timer.Stop()
		tick = timer.Chan()
	}
	select {
	case <-turn:
		waited = true
	case <-tick:
		waited = true
	case <-op.ctx.Done():
	case <-op.cancelChan():
	}
	op.waited += op.clock.Since(now)
	return waited, true
}

// takeQuotaForRetry takes a request from the quota for a retry about to
// be sent; with WaitQuota, a quota spent while the retry waited is waited
// for once more, until its reset, when that fits, and, during a paced
// release, the retry waits for its turn however many holders go before
// it: a turn taken by another holder ends no operation.
func (op *operation) takeQuotaForRetry() bool {
	th := op.t.Throttle
	resetWaited := false
	for {
		reset, ok := op.adm.take(th, op.req, op.clock)
		if ok {
			return true
		}
		turn := !reset.After(op.clock.Now()) // a release's turn, not a reset
		if !turn && resetWaited {
			return false
		}
		resetWaited = resetWaited || !turn
		if waited, _ := op.waitForQuota(reset); !waited {
			return false
		}
	}
}

// quotaSpent reports when the destination's quota resets, and whether it
// is spent now: the quota the attempt's response named, when it named one
// the destination holds, which the retry, the same request, draws from
// too. With WaitQuota the reset is, for the rules, a delay the server
// asked for, as Retry-After is: the retry waits for it when the deadline
// and MaxRetryAfter allow.
func (op *operation) quotaSpent(r *facts, resp *http.Response, now time.Time) (time.Time, bool) {
	if op.adm.dest == nil {
		return time.Time{}, false
	}
	var h http.Header
	if resp != nil {
		h = resp.Header
	}
	reset, spent := op.t.Throttle.QuotaSpent(op.adm.dest, h, now)
	if spent && op.t.Throttle.WaitQuota && mayWaitFor(op.policy, op.deadline, op.hasDeadline, reset, now) {
		r.serverDelay, r.hasServerDelay = longestServerDelay(r.serverDelay, r.hasServerDelay, reset, true, now)
	}
	return reset, spent
}

// mayWaitFor reports whether an operation may wait, at now, for a quota
// that resets at reset: no longer than MaxRetryAfter, and with
// MinAttemptTime left before its deadline, when it has one, after it.
func mayWaitFor(p policy, deadline time.Time, hasDeadline bool, reset, now time.Time) bool {
	d := reset.Sub(now)
	return d <= p.maxRetryAfter && (!hasDeadline || deadline.Sub(reset) >= p.minAttemptTime)
}

// record tells the Throttle how attempt a, which just ended, went. An
// attempt that provably never reached the server (a refused dial) gives
// back the request it took from the quota: the server never counted it.
func (op *operation) record(a *attempt) {
	a.recorded = true
	if op.adm.dest != nil {
		op.recordInThrottle(a, true)
	}
}

// recordInThrottle is record's work when a Throttle is set, apart so that record
// inlines; own says the attempt ended on its own, not as a loser, so that
// the ticket a refund gives back, the one the operation last took, is
// its own.
func (op *operation) recordInThrottle(a *attempt, own bool) {
	resp, err := a.resp, a.err
	if own && err != nil && neverSent(op.req, err) {
		op.adm.ticket.Refund()
	}
	r := throttle.Result{Sent: a.start}
	answer(&r, resp, err, op.clock)
	if err != nil {
		ended := op.callerEnded()
		var callerErr error
		if ended {
			callerErr = op.callerErr()
		}
		if unheard, overload, ok := cutBy(err, callerErr, ended && op.stalledFor(a.start)); ok {
			r.Unheard, r.Overload = unheard, overload
		}
	}
	op.t.Throttle.Record(op.adm.dest, &r, op.clock)
}

// recordUnheard tells the Throttle that attempt a, sent, ended without
// an answer it was told of, unless it was told already: a panic (of Base,
// or of a hook before the Throttle heard of the answer) ended the attempt
// or its operation. A paced release's turn the attempt took passes on.
func (a *attempt) recordUnheard(op *operation) {
	if !a.recorded && op.adm.dest != nil {
		a.recorded = true
		op.t.Throttle.Record(op.adm.dest, &throttle.Result{Sent: a.start, Unheard: true}, op.clock)
	}
}

// cutBy says how an attempt that ended in err counts for the Throttle
// when something other than the server ended it; ok is false when err is
// the server's to answer for (overloadSignal reads it). A layer below
// that refused the attempt locally heard nothing from the server. So
// does the caller's cancel; its deadline (a context deadline,
// http.Client.Timeout) that expired while the server was silent is a
// stall, as an AttemptTimeout is, when the attempt ran long enough
// (stalled, see stalledFor). callerErr is the caller's error when the
// caller ended the operation, else nil.
func cutBy(err, callerErr error, stalled bool) (unheard, overload, ok bool) {
	if errors.Is(err, throttle.ErrThrottled) {
		return true, false, true
	}
	if callerErr == nil {
		return false, false, false
	}
	stall := callerErr == context.DeadlineExceeded && stalled
	return !stall, stall, true
}

// stalledFor reports whether an attempt sent at sent, which its
// caller's deadline cut while the server was silent, ran long enough to
// be a stall: at least MinAttemptTime, the least time the Transport
// gives a retry. A caller that gives a request less (a cache lookup with
// a fallback, 20ms) cuts a healthy server's attempts short; counted as
// stalls, they would refuse every other caller of the destination. An
// attempt whose start was not read counts as a stall.
func (op *operation) stalledFor(sent time.Time) bool {
	return sent.IsZero() || op.clock.Since(sent) >= op.policy.minAttemptTime
}

// answer completes r with what resp or err says of the server: the
// response's status, header and request, the pause a 429's or a 403's
// Retry-After (or x-amz-retry-after) asks for, read on clock, and whether
// it signalled overload. It fills r in place: a Result built in one place
// and copied at once costs more than the rules.
func answer(r *throttle.Result, resp *http.Response, err error, clock clockwork.Clock) {
	r.Overload = overloadSignal(resp, err)
	if resp == nil {
		return
	}
	r.Status, r.Header, r.Request = resp.StatusCode, resp.Header, resp.Request
	if pausingStatus(resp.StatusCode) {
		r.RetryAfter, r.HasRetryAfter = ParseRetryAfter(resp.Header, clock.Now())
	}
}

// pausingStatus reports whether a response's status is one whose
// Retry-After pauses its destination in the Throttle: a 429, and a 403
// (GitHub answers its secondary rate limit with a 403 and Retry-After).
func pausingStatus(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusForbidden
}

// recordLoser tells the Throttle how a hedged attempt that lost went,
// given whether the answer it lost to signalled overload: a loser the
// operation canceled counts as throttle.Result's Canceled says; one that
// had its answer first counts as any attempt does; one never sent counts
// for nothing.
func (op *operation) recordLoser(a *attempt, lostToSignal bool) {
	a.recorded = true
	if op.adm.dest == nil {
		return
	}
	if !canceledLoser(a.err, op.callerEnded()) {
		op.recordInThrottle(a, false)
		return
	}
	r := throttle.Result{Sent: a.start, Unheard: a.unsent, Canceled: !a.unsent, Overload: lostToSignal}
	op.t.Throttle.Record(op.adm.dest, &r, op.clock)
}

// canceledLoser reports whether a hedged attempt that lost, ending in
// err, was canceled for another's answer: not by its caller (callerEnded),
// and without an answer of its own (one it had first carries no error).
func canceledLoser(err error, callerEnded bool) bool {
	return errors.Is(err, context.Canceled) && !callerEnded
}

// overloadSignal reports whether an attempt's result says the server is
// overloaded: a response as overload.Response says (a 429, 503 or 529, a
// proxy's 502 or 504, Envoy's overload headers, a 5xx with
// "X-Should-Retry: false"), an attempt timeout, a refused connection.
// Everything else, a 4xx included, is an accept.
func overloadSignal(resp *http.Response, err error) bool {
	if err != nil {
		switch ErrorClass(err) {
		case "attempt_timeout", "idle_timeout", "timeout", "connection_refused":
			return true
		}
		return false
	}
	return overload.Response(resp)
}
