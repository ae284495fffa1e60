package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestOverloadSignal: what the Transport tells its Throttle is an
// overload signal, and what an accept.
func TestOverloadSignal(t *testing.T) {
	t.Parallel()
	resp := func(status int, h http.Header) *http.Response { return &http.Response{StatusCode: status, Header: h} }
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want bool
	}{
		{"200", resp(200, nil), nil, false},
		{"404 is accepted", resp(404, nil), nil, false},
		{"400 with X-Should-Retry false is accepted", resp(400, http.Header{"X-Should-Retry": {"false"}}), nil, false},
		{"500 is accepted", resp(500, nil), nil, false},
		{"429", resp(429, nil), nil, true},
		{"503", resp(503, nil), nil, true},
		{"529", resp(529, nil), nil, true},
		{"500 with X-Should-Retry false", resp(500, http.Header{"X-Should-Retry": {" False"}}), nil, true},
		{"502 with X-Should-Retry true", resp(502, http.Header{"X-Should-Retry": {"true"}}), nil, false},
		{"502 from a proxy whose backend refused the connection", resp(502, http.Header{"Server": {"nginx"}}), nil, true},
		{"504 from a proxy whose backend did not answer", resp(504, nil), nil, true},
		{"Envoy's local overload answer", resp(503, http.Header{"X-Envoy-Overloaded": {"true"}}), nil, true},
		{"Envoy's rate-limit answer", resp(429, http.Header{"X-Envoy-Ratelimited": {"true"}}), nil, true},
		{"Envoy's overload header on a 500", resp(500, http.Header{"X-Envoy-Overloaded": {"true"}}), nil, true},
		{"Envoy's rate-limit header on a 403", resp(403, http.Header{"X-Envoy-Ratelimited": {"true"}}), nil, true},
		{"a 200 carrying Envoy's overload header was served", resp(200, http.Header{"X-Envoy-Overloaded": {"true"}}), nil, false},
		{"a 304 carrying Envoy's rate-limit header was served", resp(304, http.Header{"X-Envoy-Ratelimited": {"true"}}), nil, false},
		{"refused", nil, &netOpError{syscall.ECONNREFUSED}, true},
		{"reset is accepted", nil, &netOpError{syscall.ECONNRESET}, false},
		{"attempt timeout", nil, &attemptTimeoutError{err: context.DeadlineExceeded}, true},
		{"idle timeout", nil, fmt.Errorf("x: %w", ErrIdleTimeout), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := overloadSignal(tt.resp, tt.err); got != tt.want {
				t.Errorf("overloadSignal = %v; want %v", got, tt.want)
			}
		})
	}
}

// netOpError is a dial error carrying errno, as net returns one.
type netOpError struct{ errno syscall.Errno }

func (e *netOpError) Error() string { return "dial tcp: " + e.errno.Error() }
func (e *netOpError) Unwrap() error { return e.errno }

// TestCutByCountsOnlyWhatTheServerDid: an attempt ended by something
// other than the server counts for the Throttle as what the server did:
// a local refusal below and the caller's cancel heard nothing; the
// caller's deadline that expired while the server was silent long
// enough is a stall (an overload signal), and one that cut the attempt
// sooner heard nothing; an error the caller did not cause is the
// server's to answer for (left to overloadSignal).
func TestCutByCountsOnlyWhatTheServerDid(t *testing.T) {
	t.Parallel()
	refused := fmt.Errorf("below: %w", throttle.ErrThrottled)
	tests := []struct {
		name                   string
		err, callerErr         error
		stalled                bool
		unheard, overload, cut bool
	}{
		{"refused below", refused, nil, false, true, false, true},
		{"refused below while the caller left", refused, context.Canceled, true, true, false, true},
		{"caller canceled", context.Canceled, context.Canceled, true, true, false, true},
		{"caller's deadline on a silent server", context.DeadlineExceeded, context.DeadlineExceeded, true, false, true, true},
		{"caller's deadline before the attempt was worth it", context.DeadlineExceeded, context.DeadlineExceeded, false, true, false, true},
		{"caller canceled after a long silence", context.Canceled, context.Canceled, true, true, false, true},
		{"the server's error", syscall.ECONNRESET, nil, true, false, false, false},
		{"an attempt timeout", &attemptTimeoutError{context.DeadlineExceeded}, nil, true, false, false, false},
	}
	for _, tt := range tests {
		unheard, overload, cut := cutBy(tt.err, tt.callerErr, tt.stalled)
		if unheard != tt.unheard || overload != tt.overload || cut != tt.cut {
			t.Errorf("%s: cutBy = unheard %v, overload %v, cut %v; want %v, %v, %v", tt.name, unheard, overload, cut, tt.unheard, tt.overload, tt.cut)
		}
	}
}

// TestCanceledLoserIsOnlyOneCanceledForAnotherAnswer: a hedged attempt
// that lost counts as canceled for another's answer only when its own
// error is that cancel and the caller had not ended the operation: one
// that had its answer first, failed on its own, or was ended by its
// caller counts as any attempt does.
func TestCanceledLoserIsOnlyOneCanceledForAnotherAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		err         error
		callerEnded bool
		want        bool
	}{
		{"canceled for the winner", asLost(&attemptTimeoutError{err: context.Canceled}), false, true},
		{"its answer came first", nil, false, false},
		{"failed on its own", syscall.ECONNREFUSED, false, false},
		{"timed out on its own", &attemptTimeoutError{context.DeadlineExceeded}, false, false},
		{"the caller ended the operation", context.Canceled, true, false},
	}
	for _, tt := range tests {
		if got := canceledLoser(tt.err, tt.callerEnded); got != tt.want {
			t.Errorf("%s: canceledLoser = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestMayWaitForAQuotaOnlyWithinItsBounds: an operation waits for a
// spent quota's reset no longer than MaxRetryAfter, and, with a deadline,
// only when MinAttemptTime is left after the reset: exactly that much is
// enough, a nanosecond less is not.
func TestMayWaitForAQuotaOnlyWithinItsBounds(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	p := policy{maxRetryAfter: time.Minute, minAttemptTime: 100 * time.Millisecond}
	reset := now.Add(10 * time.Second)
	tests := []struct {
		name        string
		reset       time.Time
		deadline    time.Time
		hasDeadline bool
		want        bool
	}{
		{"no deadline", reset, time.Time{}, false, true},
		{"reset exactly MaxRetryAfter away", now.Add(time.Minute), time.Time{}, false, true},
		{"reset past MaxRetryAfter", now.Add(time.Minute + time.Nanosecond), time.Time{}, false, false},
		{"deadline well after the reset", reset, reset.Add(time.Second), true, true},
		{"exactly MinAttemptTime after the reset", reset, reset.Add(100 * time.Millisecond), true, true},
		{"less than MinAttemptTime after the reset", reset, reset.Add(100*time.Millisecond - time.Nanosecond), true, false},
		{"deadline before the reset", reset, reset.Add(-time.Second), true, false},
	}
	for _, tt := range tests {
		if got := mayWaitFor(p, tt.deadline, tt.hasDeadline, tt.reset, now); got != tt.want {
			t.Errorf("%s: mayWaitFor = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestShorterLimitOfConfiguredAndLearned: an attempt's limit is the
// shorter of AttemptTimeout and the learned one, where 0 means none.
func TestShorterLimitOfConfiguredAndLearned(t *testing.T) {
	t.Parallel()
	tests := []struct{ configured, learned, want time.Duration }{
		{0, 0, 0},
		{0, 40 * time.Millisecond, 40 * time.Millisecond},
		{time.Second, 0, time.Second},
		{time.Second, 40 * time.Millisecond, 40 * time.Millisecond},
		{30 * time.Millisecond, 40 * time.Millisecond, 30 * time.Millisecond},
		{-1, 40 * time.Millisecond, 40 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := shorterLimit(tt.configured, tt.learned); got != tt.want {
			t.Errorf("shorterLimit(%v, %v) = %v; want %v", tt.configured, tt.learned, got, tt.want)
		}
	}
}

// TestStalledOnlyWhenTheAttemptRanMinAttemptTime: an attempt cut by its
// caller's deadline counts as a stall when it ran at least MinAttemptTime
// (exactly that is enough), or when its start was not read.
func TestStalledOnlyWhenTheAttemptRanMinAttemptTime(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	op := &operation{clock: fc, policy: policy{minAttemptTime: 100 * time.Millisecond}}
	now := fc.Now()
	tests := []struct {
		name string
		sent time.Time
		want bool
	}{
		{"start not read", time.Time{}, true},
		{"ran longer", now.Add(-time.Second), true},
		{"ran exactly MinAttemptTime", now.Add(-100 * time.Millisecond), true},
		{"cut a nanosecond sooner", now.Add(-100*time.Millisecond + time.Nanosecond), false},
		{"just sent", now, false},
	}
	for _, tt := range tests {
		if got := op.stalledFor(tt.sent); got != tt.want {
			t.Errorf("%s: stalledFor = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestHedgeLostErrorNamesTheCancelAndTheWinner: a loser's error says
// another attempt won and keeps the cancellation, in its message and in
// its chain.
func TestHedgeLostErrorNamesTheCancelAndTheWinner(t *testing.T) {
	t.Parallel()
	err := asLost(&attemptTimeoutError{err: context.Canceled})
	if got, want := err.Error(), "httpretry: canceled, another attempt won: context canceled"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if !errors.Is(err, context.Canceled) || ErrorClass(err) != "hedge_lost" {
		t.Errorf("errors.Is(err, context.Canceled) = %v, class %q; want true, hedge_lost", errors.Is(err, context.Canceled), ErrorClass(err))
	}
}
