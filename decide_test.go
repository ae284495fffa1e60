package httpretry

import (
	"testing"
	"time"
)

// TestNextStopOrder is the specification of the README's stop order: after
// an attempt, the rules are checked in the order listed there, and the
// first that holds is the reason. Each case makes one rule hold together
// with every rule after it, so that a change of order fails here.
func TestNextStopOrder(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	p := policy{maxAttempts: 3, minAttemptTime: 100 * time.Millisecond, maxRetryAfter: 30 * time.Second}
	// retry is a transient, repeatable failure with a second left.
	retry := facts{
		attempts: 1, failed: true, transient: true, repeatable: true, rewindable: true,
		backoff: 50 * time.Millisecond, deadline: now.Add(time.Second), hasDeadline: true,
	}
	with := func(f func(*facts)) facts { r := retry; f(&r); return r }
	everything := func(r *facts) {
		// Every rule below canceled holds as well.
		r.transient, r.attempts, r.repeatable, r.rewindable = false, 3, false, false
		r.serverDelay, r.hasServerDelay = time.Hour, true
	}
	tests := []struct {
		name     string
		facts    facts
		want     StopReason
		wantWait time.Duration
	}{
		{"canceled before all: an error after the caller left", with(func(r *facts) { everything(r); r.callerEnded = true }), Canceled, 0},
		{"final before attempts_exhausted", with(everything), Final, 0},
		{"attempts_exhausted before not_idempotent", with(func(r *facts) {
			r.attempts, r.repeatable, r.rewindable = 3, false, false
			r.serverDelay, r.hasServerDelay = time.Hour, true
		}), AttemptsExhausted, 0},
		{"not_idempotent before body_not_rewindable", with(func(r *facts) {
			r.repeatable, r.rewindable = false, false
			r.serverDelay, r.hasServerDelay = time.Hour, true
		}), NotIdempotent, 0},
		{"body_not_rewindable before retry_after_exceeds_deadline", with(func(r *facts) {
			r.rewindable = false
			r.serverDelay, r.hasServerDelay = time.Hour, true
		}), BodyNotRewindable, 0},
		{"retry_after_exceeds_deadline before retry_after_too_long", with(func(r *facts) {
			r.serverDelay, r.hasServerDelay = time.Hour, true
		}), RetryAfterExceedsDeadline, 0},
		{"retry_after_too_long without a deadline", with(func(r *facts) {
			r.hasDeadline = false
			r.serverDelay, r.hasServerDelay = time.Hour, true
		}), RetryAfterTooLong, 0},
		{"deadline_exhausted: backoff and MinAttemptTime past the deadline", with(func(r *facts) {
			r.backoff = 901 * time.Millisecond
		}), DeadlineExhausted, 0},
		{"deadline_exhausted: less than MinAttemptTime left even without a wait", with(func(r *facts) {
			r.backoff, r.deadline = 0, now.Add(99*time.Millisecond)
		}), DeadlineExhausted, 0},
		{"a wait that exactly fits", with(func(r *facts) { r.backoff = 900 * time.Millisecond }), "", 900 * time.Millisecond},
		{"a response after the caller left: canceled, not a retry", with(func(r *facts) {
			r.failed, r.callerEnded = false, true
		}), Canceled, 0},
		{"a response after the caller left that would stop anyway keeps its reason", with(func(r *facts) {
			r.failed, r.callerEnded, r.backoff = false, true, time.Second
		}), DeadlineExhausted, 0},
		{"the last attempt is never followed by a wait", with(func(r *facts) { r.attempts = 3 }), AttemptsExhausted, 0},
		{"retry", retry, "", 50 * time.Millisecond},
		{"no deadline: any backoff fits", with(func(r *facts) { r.hasDeadline, r.backoff = false, time.Hour }), "", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := next(p, tt.facts, now)
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
