package httpretry

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file holds a copy of docs/rules.md's rules, written again as code
// for FuzzTransport and the fault matrix to check the Transport against:
// the one test oracle of both, small predicates, each a
// sentence of "Stop reasons" or "Fields and defaults", evaluated on what a
// test observed. They decide nothing and plan no wait; the tests use them
// to judge what the Transport did. The tests at the end hold them to the
// code's own lists (StopReasons, IsTransient) wherever the two can be
// compared value by value.

// rulesServerWord returns what a server's should-retry headers say:
// "true", "false", or "" when neither holds either word. X-Should-Retry
// is read first; any other value is ignored.
func rulesServerWord(h http.Header) string {
	for _, name := range []string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := strings.TrimSpace(h.Get(name)); {
		case strings.EqualFold(v, "true"):
			return "true"
		case strings.EqualFold(v, "false"):
			return "false"
		}
	}
	return ""
}

// rulesTransientResponse is "What counts as transient" for a response:
// 408, 429, 500, 502, 503, 504, 529, and 409 for a request with an
// idempotency key when the response carries Retry-After (or
// Retry-After-Ms) and is not "Idempotent-Replayed: true"; on an error
// response (4xx, 5xx) the server's own word comes first; a success is
// never retried.
func rulesTransientResponse(status int, h http.Header, keyed bool) bool {
	if status >= 400 {
		switch rulesServerWord(h) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	switch status {
	case 408, 429, 500, 502, 503, 504, 529:
		return true
	case 409:
		return keyed && (h.Get("Retry-After") != "" || h.Get("Retry-After-Ms") != "") &&
			!strings.EqualFold(strings.TrimSpace(h.Get("Idempotent-Replayed")), "true")
	}
	return false
}

// rulesVouches reports whether an error response carries the server's
// explicit word that another attempt is safe: the only thing besides a
// dial error that lets a POST without a key go again.
func rulesVouches(status int, h http.Header) bool {
	return status >= 400 && rulesServerWord(h) == "true"
}

// rulesHonoursRetryAfter lists the statuses whose Retry-After (or
// Retry-After-Ms) is a minimum wait: 409, 429, 503 and 529.
func rulesHonoursRetryAfter(status int) bool {
	switch status {
	case 409, 429, 503, 529:
		return true
	}
	return false
}

// rulesWindow is the backoff window of retry r (0 for the first retry):
// min(MaxDelay, BaseDelay·2^r).
func rulesWindow(base, ceiling time.Duration, r int) time.Duration {
	w := base
	for range r {
		if w >= ceiling {
			break
		}
		w *= 2
	}
	return min(w, ceiling)
}

// rulesFacts is what one attempt met, in the words of docs/rules.md's
// "Stop reasons" table. A test that knows a fact only within bounds (the
// fault matrix, on real sockets) judges with two rulesFacts: one at the
// bounds most favourable to a retry, one at those most favourable to a
// stop.
type rulesFacts struct {
	n           int  // the attempt's number, from 1
	maxAttempts int  // MaxAttempts, resolved
	failed      bool // it ended in an error: no response, or a body BufferResponse found broken
	callerEnded bool // the caller's context had ended when it did
	transient   bool
	// repeatable: the request is safe to repeat, or this failure proves
	// it never left the client, or the server said another attempt is
	// safe.
	repeatable bool
	// rewindable: the body can be sent again: it has GetBody or was
	// buffered, or it was never read.
	rewindable bool

	serverDelay    time.Duration // a valid Retry-After on a status that honours it
	hasServerDelay bool
	backoff        time.Duration // Jitter(window) for this retry
	hasDeadline    bool
	left           time.Duration // time left before the deadline when the Transport decided
	minAttempt     time.Duration // MinAttemptTime, resolved
	maxRetryAfter  time.Duration // MaxRetryAfter, resolved
	tokens         int           // budget tokens left for this retry
}

// rulesUnlimited is the tokens of an Unlimited budget.
const rulesUnlimited = 1 << 30

// minWait is the part of a retry's wait that is never shortened: the
// server's delay when it gave one ("the server's delay is a minimum, and
// only the jitter part is shortened when time is short"), else the whole
// draw.
func (f rulesFacts) minWait() time.Duration {
	if f.hasServerDelay {
		return f.serverDelay
	}
	return f.backoff
}

// rulesStop is one row of docs/rules.md's "Stop reasons" table: a reason
// and, as a predicate on what an attempt met, the sentence that says
// when it holds.
type rulesStop struct {
	reason StopReason
	when   func(rulesFacts) bool
}

// rulesStops is docs/rules.md's "Stop reasons" table, row by row, in its
// order.
var rulesStops = []rulesStop{
	// "before the first attempt: the Throttle refused the operation";
	// the oracle's facts hold no throttle, so after an attempt never (a
	// refused retry, asked just before the budget, is
	// TestThrottleRefusesRetries')
	{Throttled, func(f rulesFacts) bool { return f.n == 0 }},
	// "the caller's context has ended and the attempt ended in an error
	// or a transient response"
	{Canceled, func(f rulesFacts) bool { return f.callerEnded && (f.failed || f.transient) }},
	// "success, or a failure that is not transient"
	{Final, func(f rulesFacts) bool { return !f.transient }},
	// "the last of MaxAttempts failed"
	{AttemptsExhausted, func(f rulesFacts) bool { return f.n >= f.maxAttempts }},
	// "the request is not safe to repeat, the failure does not prove it
	// never left, and the server did not say X-Should-Retry: true"
	{NotIdempotent, func(f rulesFacts) bool { return !f.repeatable }},
	// "the body cannot be sent again"
	{BodyNotRewindable, func(f rulesFacts) bool { return !f.rewindable }},
	// "Retry-After + MinAttemptTime is past the deadline"
	{RetryAfterExceedsDeadline, func(f rulesFacts) bool {
		return f.hasServerDelay && f.hasDeadline && f.serverDelay > f.left-f.minAttempt
	}},
	// "Retry-After > MaxRetryAfter"
	{RetryAfterTooLong, func(f rulesFacts) bool { return f.hasServerDelay && f.serverDelay > f.maxRetryAfter }},
	// "the wait + MinAttemptTime is past the deadline", the wait being at
	// least its part that is never shortened
	{DeadlineExhausted, func(f rulesFacts) bool { return f.hasDeadline && f.minWait() > f.left-f.minAttempt }},
	// "the budget has no token for this retry"
	{BudgetExhausted, func(f rulesFacts) bool { return f.tokens <= 0 }},
}

// rulesFirstStop returns the first row of the table whose sentence
// holds, or "" when none does: "After each attempt the Transport checks,
// in this order, and stops at the first that holds."
func rulesFirstStop(f rulesFacts) StopReason {
	for _, s := range rulesStops {
		if s.when(f) {
			return s.reason
		}
	}
	return ""
}

// TestRulesOracleStopsInDecisionOrder: the oracle's table has one row per
// reason of StopReasons, in its order.
func TestRulesOracleStopsInDecisionOrder(t *testing.T) {
	t.Parallel()
	var got []StopReason
	for _, s := range rulesStops {
		got = append(got, s.reason)
	}
	if want := StopReasons(); !slices.Equal(got, want) {
		t.Errorf("the oracle's rows are %v; want StopReasons, %v", got, want)
	}
}

// rulesResponseCases returns a response of every status from 100 to 599
// to a request with and without an idempotency key, with each word of the
// server's should-retry headers, and what the oracle is told of it: its
// status, header and whether the request had a key.
func rulesResponseCases(yield func(resp *http.Response, keyed bool) bool) {
	words := []http.Header{
		{},
		{"X-Should-Retry": {"true"}},
		{"X-Should-Retry": {"false"}},
		{"X-Should-Retry": {" TRUE "}},
		{"X-Should-Retry": {"maybe"}},
		{"Stripe-Should-Retry": {"true"}},
		{"Stripe-Should-Retry": {"false"}},
		{"X-Should-Retry": {"true"}, "Stripe-Should-Retry": {"false"}},
		{"X-Should-Retry": {"maybe"}, "Stripe-Should-Retry": {"false"}},
	}
	keys := []http.Header{{}, {IdempotencyKeyHeader: {"k1"}}, {"X-Idempotency-Key": {"k1"}}}
	for status := 100; status <= 599; status++ {
		for _, h := range words {
			for _, key := range keys {
				req := &http.Request{Method: "POST", Header: key}
				resp := &http.Response{StatusCode: status, Header: h, Request: req}
				if !yield(resp, len(key) > 0) {
					return
				}
			}
		}
	}
}

// TestRulesOracleTransientMatchesIsTransient: for every status from 100 to
// 599, with and without an idempotency key, with and without the
// server's word either way, the oracle's "What counts as transient" and
// IsTransient agree, and so do the oracle's and the Transport's reading of
// the server's word that another attempt is safe.
func TestRulesOracleTransientMatchesIsTransient(t *testing.T) {
	t.Parallel()
	for resp, keyed := range rulesResponseCases {
		status, h := resp.StatusCode, resp.Header
		if got, want := IsTransient(resp, nil), rulesTransientResponse(status, h, keyed); got != want {
			t.Errorf("status %d, header %v, request header %v: IsTransient = %v; the oracle's copy of the rule (rulesTransientResponse, in this file) says %v: a changed rule changes both, and docs/rules.md", status, h, resp.Request.Header, got, want)
		}
		if got, want := serverVouches(resp), rulesVouches(status, h); got != want {
			t.Errorf("status %d, header %v: serverVouches = %v; the oracle's copy of the rule (rulesVouches, in this file) says %v: a changed rule changes both, and docs/rules.md", status, h, got, want)
		}
	}
}

// TestRulesOracleHonoursRetryAfterMatches: for every status from 100 to 599,
// the oracle's list of statuses whose Retry-After is a minimum is the
// Transport's.
func TestRulesOracleHonoursRetryAfterMatches(t *testing.T) {
	t.Parallel()
	for status := 100; status <= 599; status++ {
		if got, want := honoursRetryAfter(status), rulesHonoursRetryAfter(status); got != want {
			t.Errorf("status %d: honoursRetryAfter = %v; the oracle's copy of the rule (rulesHonoursRetryAfter, in this file) says %v: a changed rule changes both, and docs/rules.md", status, got, want)
		}
	}
}
