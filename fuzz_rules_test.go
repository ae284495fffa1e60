package httpretry

import (
	"testing"
	"time"
)

// This file judges FuzzTransport's runs by docs/rules.md's "Stop reasons"
// table and its paragraph on waits. On the fake clock every fact the table
// needs is known exactly (when each attempt ended, what it met, the
// deadline, the draw of the fixed jitter), so the table's order sentence
// leaves a single reason after each attempt: the test asserts it, and
// that no row held after an attempt the Transport retried.

// fzRules is one run, as FuzzTransport observed it.
type fzRules struct {
	sc             fzScenario
	calls          []*fzCall
	attempts       []Attempt
	o              Outcome
	deadline       time.Time
	hasDeadline    bool
	callerDeadline time.Time
	minAttempt     time.Duration
	keyless        bool
	bufFails       func(*fzCall) bool
}

// facts reads what attempt n (from 1) met from the fuzzer's script and
// the fake clock.
func (r *fzRules) facts(n int, c *fzCall) rulesFacts {
	sc := r.sc
	f := rulesFacts{
		n:           n,
		maxAttempts: sc.maxAttempts,
		failed:      c.err != nil || r.bufFails(c),
		callerEnded: !r.callerDeadline.IsZero() && !c.end.Before(r.callerDeadline),
		rewindable:  true, // every fuzz body is a strings.Reader, whose GetBody http.NewRequest sets
		hasDeadline: r.hasDeadline,
		left:        r.deadline.Sub(c.end),
		minAttempt:  r.minAttempt,
		backoff: rulesWindow(durationOr(sc.baseDelay, DefaultBaseDelay), durationOr(sc.maxDelay, DefaultMaxDelay), n-1) /
			4 * time.Duration(sc.jitterQuarters),
		maxRetryAfter: durationOr(sc.maxRetryAfter, DefaultMaxRetryAfter),
		tokens:        rulesUnlimited,
	}
	switch sc.budget {
	case 1:
		f.tokens = 1 - (n - 1) // NewTokenBucket(1, 0): one token, never replenished
	case 2:
		f.tokens = 0 // NewTokenBucket(0, 0)
	}
	// Every error the fuzz Base returns is in docs/rules.md's transient list:
	// refused, reset, the server closing the connection, a timeout.
	f.transient = f.failed
	f.repeatable = !r.keyless
	if f.failed {
		f.repeatable = f.repeatable || c.dialError()
		return f
	}
	status, h := c.resp.StatusCode, c.resp.Header
	f.transient = rulesTransientResponse(status, h, sc.method == "POST+key")
	f.repeatable = f.repeatable || rulesVouches(status, h)
	if rulesHonoursRetryAfter(status) && c.step.ra.ok {
		f.serverDelay, f.hasServerDelay = c.step.ra.delay, true
	}
	return f
}

// fzCheckRules checks every attempt against docs/rules.md's table and its
// waits: after an attempt the Transport retried, no row held and the wait
// is the one docs/rules.md describes; after the last one, the reason is the
// first row that holds.
func fzCheckRules(t *testing.T, r fzRules, desc string) {
	t.Helper()
	for k, c := range r.calls {
		f := r.facts(k+1, c)
		holds := rulesFirstStop(f)
		if k+1 == len(r.calls) {
			if holds != r.o.Reason {
				t.Errorf("after the last attempt (%d) the first row that holds of the oracle's stop table (rulesStops, rules_oracle_test.go) is %q; the Transport stopped with %q\n%s",
					k+1, holds, r.o.Reason, desc)
			}
			return
		}
		if holds != "" {
			t.Errorf("after attempt %d the oracle's %q holds (rulesStops, rules_oracle_test.go); the Transport retried\n%s", k+1, holds, desc)
			continue
		}
		fzCheckWait(t, f, r.attempts[k].Wait, desc)
	}
}

// fzCheckWait checks the wait w before the retry that follows an attempt
// that met f: "the wait is Jitter(window)"; after a valid Retry-After of
// S, "S + Jitter(window): the server's delay is a minimum, and only the
// jitter part is shortened when time is short"; and no retry starts with
// less than MinAttemptTime left.
func fzCheckWait(t *testing.T, f rulesFacts, w time.Duration, desc string) {
	t.Helper()
	if f.hasDeadline && w > f.left-f.minAttempt {
		t.Errorf("after attempt %d: a wait of %v leaves less than MinAttemptTime %v of the %v left\n%s", f.n, w, f.minAttempt, f.left, desc)
	}
	if !f.hasServerDelay {
		if w != f.backoff {
			t.Errorf("after attempt %d: waited %v; the oracle's wait (rules_oracle_test.go) is Jitter(window) = %v\n%s", f.n, w, f.backoff, desc)
		}
		return
	}
	full := f.serverDelay + min(f.backoff, maxDuration-f.serverDelay)
	switch {
	case w < f.serverDelay || w > full:
		t.Errorf("after attempt %d: waited %v; want between Retry-After %v and it + Jitter(window) = %v\n%s", f.n, w, f.serverDelay, full, desc)
	case w < full && !(f.hasDeadline && full > f.left-f.minAttempt):
		t.Errorf("after attempt %d: waited %v, shorter than Retry-After + Jitter(window) = %v, though time was not short (%v left)\n%s",
			f.n, w, full, f.left, desc)
	}
}
