package httpretry

import (
	"slices"
	"testing"
	"time"
)

// stopNow is the time of the decision in the tests of next.
var stopNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// stopPolicy is the policy of the tests of next.
var stopPolicy = policy{maxAttempts: 3, minAttemptTime: 100 * time.Millisecond, maxRetryAfter: 30 * time.Second}

// stopRetry is a transient, repeatable failure with a minute left before
// the deadline: no stop rule holds, and it is retried after its backoff.
var stopRetry = facts{
	attempts: 1, failed: true, transient: true, repeatable: true, rewindable: true,
	backoff: 50 * time.Millisecond, deadline: stopNow.Add(time.Minute), hasDeadline: true,
}

// stopHolds makes the rule of each reason that next decides hold in r,
// changing as little as it can. Applied from the last reason to the first,
// every later rule still holds when an earlier one is made to: a server
// delay too long for the deadline is also longer than MaxRetryAfter, and
// a backoff too long for the deadline stays so.
var stopHolds = map[StopReason]func(r *facts){
	Canceled:          func(r *facts) { r.callerEnded = true },
	Final:             func(r *facts) { r.transient = false },
	AttemptsExhausted: func(r *facts) { r.attempts = stopPolicy.maxAttempts },
	NotIdempotent:     func(r *facts) { r.repeatable = false },
	BodyNotRewindable: func(r *facts) { r.rewindable = false },
	RetryAfterExceedsDeadline: func(r *facts) {
		r.serverDelay, r.hasServerDelay = time.Hour, true
	},
	// 40 s fits in the minute left, and is past MaxRetryAfter.
	RetryAfterTooLong: func(r *facts) { r.serverDelay, r.hasServerDelay = 40*time.Second, true },
	// The backoff plus MinAttemptTime is 1 ns past the deadline.
	DeadlineExhausted: func(r *facts) { r.backoff = time.Minute - stopPolicy.minAttemptTime + 1 },
	Throttled:         func(r *facts) { r.throttled = true },
	BudgetExhausted:   func(r *facts) { r.noToken = true },
}

// stopOrderAfterAttempt is the order in which next checks the stop rules after an
// attempt: StopReasons' order, except that Throttled, which StopReasons
// lists first because the Throttle is also asked before the first
// attempt, comes after DeadlineExhausted and before the budget.
func stopOrderAfterAttempt(t *testing.T) []StopReason {
	t.Helper()
	order := StopReasons()
	if order[0] != Throttled {
		t.Fatalf("the first stop reason is %s; the throttle is asked before the first attempt, before every rule next decides", order[0])
	}
	if last := order[len(order)-1]; last != BudgetExhausted {
		t.Fatalf("the last stop reason is %s; the budget must be asked last, after every rule next decides", last)
	}
	after := slices.Clone(order[1 : len(order)-1])
	return append(after, Throttled, BudgetExhausted)
}

// TestNextStopOrder is the specification of the stop order: after an
// attempt, next checks the rules of all ten stop reasons in the order of
// stopOrderAfterAttempt and stops with the first that holds, the Throttle's
// refusal and the budget's empty bucket included (the loop asks for those
// two verdicts only when next allowed the retry without them). For each
// reason, the case makes its rule hold together with every rule after
// it, so that any change of order fails here.
func TestNextStopOrder(t *testing.T) {
	t.Parallel()
	decided := stopOrderAfterAttempt(t)
	if len(stopHolds) != len(StopReasons()) || len(decided) != len(StopReasons()) {
		t.Fatalf("stopHolds has %d rules, next decides %d reasons (%v); want every one of the %d stop reasons", len(stopHolds), len(decided), decided, len(StopReasons()))
	}
	for i, want := range decided {
		t.Run(string(want)+" first", func(t *testing.T) {
			t.Parallel()
			r := stopRetry
			for _, reason := range slices.Backward(decided[i:]) {
				hold, ok := stopHolds[reason]
				if !ok {
					t.Fatalf("no rule of stopHolds makes %s hold", reason)
				}
				hold(&r)
			}
			if got := next(stopPolicy, r, stopNow); got.stop != want || got.wait != 0 {
				t.Errorf("with %v all holding: next = {stop %q, wait %v}; want {stop %q}", decided[i:], got.stop, got.wait, want)
			}
		})
		t.Run(string(want)+" alone", func(t *testing.T) {
			t.Parallel()
			r := stopRetry
			stopHolds[want](&r)
			if got := next(stopPolicy, r, stopNow); got.stop != want || got.wait != 0 {
				t.Errorf("next = {stop %q, wait %v}; want {stop %q}", got.stop, got.wait, want)
			}
		})
	}
}

// TestNextStopEdges covers what the order alone does not: where each
// rule's boundary lies, and when the caller's end counts.
func TestNextStopEdges(t *testing.T) {
	t.Parallel()
	with := func(f func(*facts)) facts { r := stopRetry; f(&r); return r }
	tests := []struct {
		name     string
		facts    facts
		want     StopReason
		wantWait time.Duration
	}{
		{"retry", stopRetry, "", 50 * time.Millisecond},
		{"a wait that exactly fits", with(func(r *facts) { r.backoff = time.Minute - stopPolicy.minAttemptTime }), "", time.Minute - stopPolicy.minAttemptTime},
		{"deadline_exhausted: less than MinAttemptTime left even without a wait", with(func(r *facts) {
			r.backoff, r.deadline = 0, stopNow.Add(99*time.Millisecond)
		}), DeadlineExhausted, 0},
		{"no deadline: any backoff fits", with(func(r *facts) { r.hasDeadline, r.backoff = false, time.Hour }), "", time.Hour},
		{"one attempt left", with(func(r *facts) { r.attempts = stopPolicy.maxAttempts - 1 }), "", 50 * time.Millisecond},
		{"a transient response after the caller left: canceled, before every other rule", with(func(r *facts) {
			r.failed, r.callerEnded = false, true
			r.attempts, r.repeatable, r.rewindable, r.backoff = 3, false, false, time.Hour
		}), Canceled, 0},
		{"a response that is not transient after the caller left: final", with(func(r *facts) {
			r.failed, r.callerEnded, r.transient = false, true, false
		}), Final, 0},
		{"an error that is not transient after the caller left: canceled", with(func(r *facts) {
			r.callerEnded, r.transient = true, false
		}), Canceled, 0},
		{"throttled: the quota is spent until 1 ns after the planned wait", with(func(r *facts) {
			r.quotaSpent, r.quotaReset = true, stopNow.Add(50*time.Millisecond+1)
		}), Throttled, 0},
		{"a quota spent until the planned wait ends: retried", with(func(r *facts) {
			r.quotaSpent, r.quotaReset = true, stopNow.Add(50*time.Millisecond)
		}), "", 50 * time.Millisecond},
		{"a reset the server's delay outlasts: retried after the delay", with(func(r *facts) {
			r.quotaSpent, r.quotaReset = true, stopNow.Add(time.Second)
			r.serverDelay, r.hasServerDelay = time.Second, true
		}), "", time.Second + 50*time.Millisecond},
		{"throttled before budget_exhausted", with(func(r *facts) { r.throttled, r.noToken = true, true }), Throttled, 0},
		{"deadline_exhausted before a spent quota", with(func(r *facts) {
			r.backoff = time.Minute
			r.quotaSpent, r.quotaReset = true, stopNow.Add(time.Hour)
		}), DeadlineExhausted, 0},
		{"retry_after_too_long without a deadline", with(func(r *facts) {
			r.hasDeadline, r.serverDelay, r.hasServerDelay = false, time.Hour, true
		}), RetryAfterTooLong, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := next(stopPolicy, tt.facts, stopNow)
			if got.stop != tt.want || got.wait != tt.wantWait {
				t.Errorf("next = {stop %q, wait %v}; want {stop %q, wait %v}", got.stop, got.wait, tt.want, tt.wantWait)
			}
		})
	}
}

// TestScheduleServerDelay: the server's delay is a minimum; only the
// jitter on top of it is shortened to fit, and a delay that does not fit
// is never shortened.
func TestScheduleServerDelay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	p := policy{maxAttempts: 3, minAttemptTime: 100 * time.Millisecond, maxRetryAfter: 30 * time.Second}
	base := facts{attempts: 1, transient: true, repeatable: true, rewindable: true, hasServerDelay: true}
	tests := []struct {
		name     string
		delay    time.Duration
		backoff  time.Duration
		left     time.Duration // 0: no deadline
		want     StopReason
		wantWait time.Duration
	}{
		{"delay plus the whole jitter", time.Second, 200 * time.Millisecond, 10 * time.Second, "", 1200 * time.Millisecond},
		{"the jitter shortened to fit", time.Second, 900 * time.Millisecond, 1500 * time.Millisecond, "", 1400 * time.Millisecond},
		{"the delay exactly fits, no jitter", time.Second, 900 * time.Millisecond, 1100 * time.Millisecond, "", time.Second},
		{"one nanosecond too long", time.Second, 0, 1100*time.Millisecond - 1, RetryAfterExceedsDeadline, 0},
		{"past MaxRetryAfter", 31 * time.Second, 0, 0, RetryAfterTooLong, 0},
		{"exactly MaxRetryAfter", 30 * time.Second, 0, 0, "", 30 * time.Second},
		{"zero delay: the jitter alone", 0, 70 * time.Millisecond, time.Second, "", 70 * time.Millisecond},
		{"the largest delay does not overflow", maxDuration, maxDuration, 0, RetryAfterTooLong, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := base
			r.serverDelay, r.backoff = tt.delay, tt.backoff
			if tt.left > 0 {
				r.deadline, r.hasDeadline = now.Add(tt.left), true
			}
			got := next(p, r, now)
			if got.stop != tt.want || got.wait != tt.wantWait {
				t.Errorf("next = {stop %q, wait %v}; want {stop %q, wait %v}", got.stop, got.wait, tt.want, tt.wantWait)
			}
		})
	}
	// Without a maximum the largest delay is honoured, not wrapped.
	r := base
	r.serverDelay, r.backoff = maxDuration, time.Second
	if got := next(policy{maxAttempts: 3, maxRetryAfter: maxDuration}, r, now); got.stop != "" || got.wait != maxDuration {
		t.Errorf("next = %+v; want a wait of the largest Duration", got)
	}
}

// TestStartable: a retry planned to leave MinAttemptTime may start a
// little late (a timer fires after its time), up to half of
// MinAttemptTime; later than that it stops.
func TestStartable(t *testing.T) {
	t.Parallel()
	const m = 100 * time.Millisecond
	tests := []struct {
		left time.Duration
		want bool
	}{
		{m, true},
		{m - 10*time.Millisecond, true}, // 10% late: a busy machine's timer
		{m / 2, true},
		{m/2 - 1, false},
		{0, false},
		{-time.Second, false},
	}
	for _, tt := range tests {
		if got := startable(tt.left, m); got != tt.want {
			t.Errorf("startable(%v, %v) = %v; want %v", tt.left, m, got, tt.want)
		}
	}
}

// TestLongestServerDelay: the next attempt's server delay is the longer of its own Retry-After and what remains of an earlier answer's; one that has passed counts as none.
func TestLongestServerDelay(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		name         string
		own          time.Duration
		hasOwn       bool
		notBefore    time.Time
		hasNotBefore bool
		want         time.Duration
		wantHas      bool
	}{
		{"neither", 0, false, time.Time{}, false, 0, false},
		{"own only", 3 * time.Second, true, time.Time{}, false, 3 * time.Second, true},
		{"earlier only", 0, false, now.Add(time.Second), true, time.Second, true},
		{"earlier longer", 500 * time.Millisecond, true, now.Add(2 * time.Second), true, 2 * time.Second, true},
		{"own longer", 5 * time.Second, true, now.Add(2 * time.Second), true, 5 * time.Second, true},
		{"earlier passed", 0, false, now.Add(-time.Second), true, 0, false},
		{"earlier passed, own kept", time.Second, true, now, true, time.Second, true},
	}
	for _, tt := range tests {
		got, has := longestServerDelay(tt.own, tt.hasOwn, tt.notBefore, tt.hasNotBefore, now)
		if got != tt.want || has != tt.wantHas {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, got, has, tt.want, tt.wantHas)
		}
	}
	later := now.Add(time.Second)
	if got := latestNotBefore(later, true, now); !got.Equal(later) {
		t.Errorf("latestNotBefore kept %v; want the later %v", got, later)
	}
	if got := latestNotBefore(later, false, now); !got.Equal(now) {
		t.Errorf("latestNotBefore without a previous time = %v; want %v", got, now)
	}
}

// TestResumeStopOrder: when the wait before a retry ends, the caller's
// end stops it before everything, a deadline too near for the attempt
// (allowing a wake-up up to half of MinAttemptTime late) before a spent
// quota, and a spent quota alone stops it as throttled.
func TestResumeStopOrder(t *testing.T) {
	t.Parallel()
	minTime := stopPolicy.minAttemptTime
	tests := []struct {
		name string
		w    waitFacts
		want StopReason
	}{
		{"nothing holds: the retry starts", waitFacts{left: time.Minute, bounded: true}, ""},
		{"no deadline: any wake-up is in time", waitFacts{left: -time.Hour}, ""},
		{"canceled before everything", waitFacts{callerEnded: true, left: -time.Second, bounded: true, quotaSpent: true}, Canceled},
		{"deadline_exhausted before throttled", waitFacts{left: minTime/2 - 1, bounded: true, quotaSpent: true}, DeadlineExhausted},
		{"a wake-up half of MinAttemptTime late still starts", waitFacts{left: minTime / 2, bounded: true}, ""},
		{"throttled: the quota spent while waiting", waitFacts{left: time.Minute, bounded: true, quotaSpent: true}, Throttled},
	}
	for _, tt := range tests {
		if got := resume(stopPolicy, tt.w); got != tt.want {
			t.Errorf("%s: resume = %q; want %q", tt.name, got, tt.want)
		}
	}
}

// TestRefusedBeforeStopOrder: an operation that ends before its first
// attempt stops as canceled when the caller left, whatever else holds;
// then as throttled when the Throttle refused it; then as
// deadline_exhausted when its Timeout passed; else as final.
func TestRefusedBeforeStopOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		callerEnded, throttled, timedOut bool
		want                             StopReason
	}{
		{true, true, true, Canceled},
		{false, true, true, Throttled},
		{false, false, true, DeadlineExhausted},
		{false, false, false, Final},
	}
	for _, tt := range tests {
		if got := refusedBefore(tt.callerEnded, tt.throttled, tt.timedOut); got != tt.want {
			t.Errorf("refusedBefore(caller ended %v, throttled %v, timed out %v) = %q; want %q", tt.callerEnded, tt.throttled, tt.timedOut, got, tt.want)
		}
	}
}
