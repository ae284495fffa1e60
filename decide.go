package httpretry

import (
	"net/http"
	"time"
)

// This file holds the retry decision as a pure function: given what an
// attempt produced and the time now, stop (and why) or retry (and after
// what wait). It reads no clock, calls no budget and touches no body, so
// its table tests are the specification of the stop order, StopReasons.
// The loop in operation.go gathers the facts (asking GetBody for the next
// body among them) and applies the effects around it. The Throttle's draw and the budget's
// token are effects: the loop asks for them once next allowed the retry
// without them, the token last, and hands next their answers as facts.
//
// Where each StopReason is decided:
//
//	before the first attempt  refusedBefore  canceled, throttled, deadline_exhausted, final
//	a first attempt sent      IsTransient    final (eligible's rule for a response that is
//	directly (direct.go)                     not transient, asked before the operation exists;
//	                                         any other answer goes to next)
//	after an attempt          next           all ten, in this order:
//	                            eligible       canceled, final, attempts_exhausted,
//	                                           not_idempotent, body_not_rewindable
//	                            schedule       retry_after_exceeds_deadline,
//	                                           retry_after_too_long, deadline_exhausted
//	                            next itself    throttled, budget_exhausted
//	when a wait ends          resume         canceled, deadline_exhausted, throttled
//
// A hedged operation adds the pure rules of its own at the end of the
// file (afterAttempt, hedgeStops, …): when another attempt is sent or the
// operation waits; it stops with next's reasons alone (a hedge that finds
// no body to send is not sent, and stops nothing).

// policy is the part of a Transport's settings the decision reads, with
// zero values resolved to their defaults.
type policy struct {
	maxAttempts    int
	minAttemptTime time.Duration
	maxRetryAfter  time.Duration
}

// facts is what the decision knows of the attempt that just ended.
type facts struct {
	// attempts is the number of attempts made so far, including this one.
	attempts int
	// failed is set when the attempt ended in an error, without a
	// response.
	failed bool
	// callerEnded is set when the caller's context has ended (canceled,
	// or its deadline passed). It is only gathered for an attempt that
	// ended in an error or a transient response: a response that ends
	// the operation anyway is final, whoever is still waiting for it.
	callerEnded bool
	// transient is set when another attempt could resolve the failure.
	transient bool
	// repeatable is set when another attempt cannot repeat a side
	// effect: the request is idempotent, it provably never left the
	// client, or the server said another attempt is safe.
	repeatable bool
	// rewindable is set when the request body can be sent again: it has
	// none, a GetBody that gave a fresh one, a buffered copy, or it was
	// never read.
	rewindable bool
	// serverDelay is the server's requested delay, when hasServerDelay.
	serverDelay    time.Duration
	hasServerDelay bool
	// backoff is the wait drawn from this retry's backoff window.
	backoff time.Duration
	// deadline is the operation's deadline, when hasDeadline.
	deadline    time.Time
	hasDeadline bool

	// The verdicts of the Throttle and the budget. quotaSpent says the
	// destination's known quota is spent until quotaReset: a retry
	// planned to start before then would meet another 429. throttled and
	// noToken are effects' answers (the Throttle's draw, the budget's
	// withdrawal): the loop asks for them only once next allowed the
	// retry without them, the budget last, and decides again.
	quotaSpent bool
	quotaReset time.Time
	throttled  bool
	noToken    bool
}

// decision is what happens after an attempt: a stop, or a retry after
// wait.
type decision struct {
	stop       StopReason // empty for a retry
	wait       time.Duration
	retryAfter time.Duration // the part of wait the server asked for
	at         time.Time     // when the retry is to start: set by the loop, not by next
}

func stopWith(reason StopReason) decision { return decision{stop: reason} }

// next applies the stop rules to the attempt described by r at time now,
// in the order of StopReasons after an attempt: Canceled to
// DeadlineExhausted, then Throttled (a quota spent until after the
// planned wait, or the Throttle's refusal), then BudgetExhausted.
func next(p policy, r facts, now time.Time) decision {
	if reason := eligible(&p, &r); reason != "" {
		return stopWith(reason)
	}
	d := schedule(p, r, now)
	if d.stop != "" {
		return d
	}
	if r.throttled || (r.quotaSpent && now.Add(d.wait).Before(r.quotaReset)) {
		return stopWith(Throttled)
	}
	if r.noToken {
		return stopWith(BudgetExhausted)
	}
	return d
}

// eligible applies the rules that need no clock: whether another attempt
// could help and may be sent at all. It returns "" when they allow a
// retry. It only reads p and r; they are pointers because the success path
// asks it first, and copying the facts there costs more than the rules.
func eligible(p *policy, r *facts) StopReason {
	if r.callerEnded && (r.failed || r.transient) {
		// Nobody is waiting for another attempt. An error is checked
		// here before Final, because the caller's own cancellation is
		// not transient.
		return Canceled
	}
	if !r.transient {
		return Final
	}
	if r.attempts >= p.maxAttempts {
		return AttemptsExhausted
	}
	if !r.repeatable {
		return NotIdempotent
	}
	if !r.rewindable {
		return BodyNotRewindable
	}
	return ""
}

// schedule plans the wait before a retry that the rules of eligible
// allowed, or stops when the server's delay does not fit before the
// deadline or is too long, or the wait and MinAttemptTime do not fit
// before the deadline. With a server delay the wait is at least that
// delay, so a wait that does not fit is always one whose delay does not
// either: retry_after_exceeds_deadline, checked first.
func schedule(p policy, r facts, now time.Time) decision {
	// room is how long the wait may be so that MinAttemptTime is still
	// left after it; -1 when even a zero wait leaves too little. Without
	// a deadline there is no limit.
	room := maxDuration
	if r.hasDeadline {
		room = -1
		if left := r.deadline.Sub(now); left >= p.minAttemptTime {
			room = left - p.minAttemptTime
		}
	}
	if !r.hasServerDelay {
		if r.backoff > room {
			return stopWith(DeadlineExhausted)
		}
		return decision{wait: r.backoff}
	}
	if r.serverDelay > room {
		// The server's delay is never shortened to fit.
		return stopWith(RetryAfterExceedsDeadline)
	}
	if r.serverDelay > p.maxRetryAfter {
		return stopWith(RetryAfterTooLong)
	}
	// The server's delay is a minimum; the jitter only spreads clients,
	// so it is what gets shortened when time is short.
	jitter := min(r.backoff, room-r.serverDelay, maxDuration-r.serverDelay)
	return decision{wait: r.serverDelay + jitter, retryAfter: r.serverDelay}
}

// waitFacts is what the decision knows when the wait before a retry ends.
type waitFacts struct {
	// callerEnded is set when the caller's context ended, or its
	// Request.Cancel closed, during the wait.
	callerEnded bool
	// left is the time left before the operation's deadline, when
	// bounded.
	left    time.Duration
	bounded bool
	// quotaSpent is set when the destination's known quota has nothing
	// left for the retry (others spent its new window meanwhile). Taking
	// a request from it is an effect: the loop asks only once resume
	// allowed the retry without it, and decides again.
	quotaSpent bool
}

// resume applies the rules that hold when the wait before a retry ends,
// before the retry starts, in the order of StopReasons: Canceled; then
// DeadlineExhausted, when the wake-up came much later than planned (the
// process was stopped) or the operation's Timeout ended the wait; then
// Throttled. It returns "" when the retry may start.
func resume(p policy, w waitFacts) StopReason {
	if w.callerEnded {
		return Canceled
	}
	if w.bounded && !startable(w.left, p.minAttemptTime) {
		return DeadlineExhausted
	}
	if w.quotaSpent {
		return Throttled
	}
	return ""
}

// refusedBefore is the stop reason of an operation that ended before its
// first attempt: Canceled when the caller left, Throttled when the
// Throttle refused it, DeadlineExhausted when its Timeout passed (while
// its body was buffered), else Final (the body could not be read, or
// another error no attempt can resolve).
func refusedBefore(callerEnded, throttled, timedOut bool) StopReason {
	if callerEnded {
		return Canceled
	}
	if throttled {
		return Throttled
	}
	if timedOut {
		return DeadlineExhausted
	}
	return Final
}

// longestServerDelay is the server's delay for the next attempt: the
// longer of the one the attempt that just ended was asked for (own, when
// hasOwn) and what remains of the one an earlier answer of the operation
// asked for (until notBefore, when hasNotBefore). A Retry-After is a
// minimum, whichever attempt it came with: a hedged operation discards
// answers while other attempts run, and the retry after the last of them
// fails still owes the wait they asked for.
func longestServerDelay(own time.Duration, hasOwn bool, notBefore time.Time, hasNotBefore bool, now time.Time) (time.Duration, bool) {
	if !hasNotBefore || !notBefore.After(now) {
		return own, hasOwn
	}
	earlier := notBefore.Sub(now)
	if !hasOwn {
		return earlier, true
	}
	return max(own, earlier), true
}

// latestNotBefore is the later of two times a retry must not start
// before; prev counts only when hasPrev.
func latestNotBefore(prev time.Time, hasPrev bool, t time.Time) time.Time {
	if hasPrev && prev.After(t) {
		return prev
	}
	return t
}

// lateWakeup is how late after its planned start a retry may begin and
// still count as planned: a timer fires a little after its time, and a
// wait planned to leave MinAttemptTime must not be thrown away for that.
// A wake-up later than this (the process was stopped, the machine
// suspended) stops the operation instead.
func lateWakeup(minAttemptTime time.Duration) time.Duration {
	return minAttemptTime / 2
}

// startable reports whether a retry planned to leave minAttemptTime may
// start with left remaining before the deadline.
func startable(left, minAttemptTime time.Duration) bool {
	return left >= minAttemptTime-lateWakeup(minAttemptTime)
}

// The hedging rules. A hedged operation has several attempts in flight;
// when one ends, these say whether its answer is the operation's, whether
// the next attempt starts at once, or whether the others are waited for.

// hedgeFacts is what the hedging rules know when an attempt of a hedged
// operation ends.
type hedgeFacts struct {
	// stop is what eligible says of the attempt alone: "" when another
	// attempt could help.
	stop StopReason
	// inFlight is the number of attempts still running besides it.
	inFlight int
	// inProgress is set when the answer says that a duplicate of the
	// request is still being processed (an idempotency layer's 409):
	// another attempt now would get the same answer.
	inProgress bool
	// mayStart is what mayStartHedge says now.
	mayStart bool
	// hedgeError is set when the attempt is a hedge that ended with an
	// error of its own, no response: nothing a server said.
	hedgeError bool
}

// hedgeAction is what follows the end of an attempt of a hedged operation.
type hedgeAction uint8

const (
	// hedgeWin: the attempt's answer (or error) is the operation's; the
	// others lose.
	hedgeWin hedgeAction = iota
	// hedgeKeep: wait for the attempts in flight.
	hedgeKeep
	// hedgeNow: start the next attempt at once, as for a non-fatal answer
	// (503, 529, a connection error): waiting out the delay would only
	// leave fewer attempts running.
	hedgeNow
	// hedgeRetry: nothing is in flight and another attempt could help: go
	// on as the sequential loop does, with a wait and a retry.
	hedgeRetry
)

// afterAttempt decides what follows the end of an attempt of a hedged
// operation. An answer that ends the operation (Final), or the caller
// leaving (Canceled), wins at once; but a hedge's own final error (a
// certificate its pool does not trust, a request its Base refuses) is no
// answer of the server's and never ends an attempt still running: it is
// set aside, and no further hedge is sent (see hedgeStops). A failure that
// another attempt could resolve never ends the attempts still running: it
// starts the next one at once when one may start, unless its answer says a
// duplicate is in progress. With nothing left in flight, the retry rules
// decide.
func afterAttempt(f hedgeFacts) hedgeAction {
	if hedgeStops(f) {
		return hedgeKeep
	}
	if f.stop == Final || f.stop == Canceled {
		return hedgeWin
	}
	if f.inFlight == 0 && f.stop != "" {
		return hedgeWin
	}
	if f.inFlight == 0 {
		return hedgeRetry
	}
	if f.stop == "" && f.mayStart && !f.inProgress {
		return hedgeNow
	}
	return hedgeKeep
}

// hedgeStops reports whether the end of an attempt ends hedging for the
// operation: a hedge's own final error set aside says the hedges' path is
// broken, and another hedge would meet it again.
func hedgeStops(f hedgeFacts) bool {
	return f.stop == Final && f.hedgeError && f.inFlight > 0
}

// mayStartHedge reports whether another attempt may be sent beside those
// in flight: fewer than MaxAttempts started, hedging not stopped (stopped
// says the budget or the Throttle refused a hedge, no body could be made,
// or the operation's context ended; the extra-load cap's refusal does not
// stop it), never ending the attempts running, and at least
// MinAttemptTime left before the deadline when there is one.
func mayStartHedge(p policy, started int, stopped bool, left time.Duration, bounded bool) bool {
	return started < p.maxAttempts && !stopped && (!bounded || left >= p.minAttemptTime)
}

// hedgeSafe reports whether concurrent copies of a request may be sent.
// It must be safe to repeat (idempotent) and its body must be one every
// attempt can have its own copy of (rewindable: none, or GetBody). A
// request that is safe only by its idempotency key (keyed, not
// idempotent by its method or its context's mark) is hedged only when
// the server deduplicates concurrent duplicates: a key protects against
// a duplicate that arrives after the first ended, not one that runs
// beside it.
func hedgeSafe(idempotent, keyed, byMethod, deduplicates, rewindable bool) bool {
	if !idempotent || !rewindable {
		return false
	}
	return !keyed || byMethod || deduplicates
}

// latencySample says whether an attempt that ended is a latency sample,
// and whether it is censored: a good answer (see goodAnswer) is one; an
// attempt cut by its time limit, or canceled as a loser, is one of at
// least that long; a failure (an error, a 503, a refused connection),
// final or transient, is none, since fast failures would pull the
// estimate down.
func latencySample(answered, timedOut bool) (record, censored bool) {
	if answered {
		return true, false
	}
	return timedOut, timedOut
}

// goodAnswer reports whether a response of the given status (0 for
// none), which Transient judged transient or not, is an answer the
// server gave in its own time: not a failure, final or transient. A 5xx
// or a 429 is a failure even when final ("X-Should-Retry: false", what a
// server sends when it has spent its time budget): it comes back fast
// and says nothing of how long the work takes.
func goodAnswer(status int, transient bool) bool {
	return status != 0 && !transient && status < 500 && status != http.StatusTooManyRequests
}
