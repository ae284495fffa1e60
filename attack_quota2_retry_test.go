package httpretry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestQuotaRetryOfA429IsPacedByTheQuotaItsAnswerNamed: a host with two
// named quotas (GitHub's core and search). A search request's 429 says
// the search quota is spent for 60s; its retry is the same request, so it
// draws from the search quota too, which its own answer named: it must
// not be sent before the reset (one 429 in the window, the operation
// stopped with throttled and the 429 returned), though the core quota
// still has requests left.
func TestQuotaRetryOfA429IsPacedByTheQuotaItsAnswerNamed(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var search atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"X-Ratelimit-Resource": {"core"}, "X-Ratelimit-Limit": {"5000"},
			"X-Ratelimit-Remaining": {"4999"}, "X-Ratelimit-Reset": {"3600"}}
		status := 200
		if r.URL.Path == "/search" {
			search.Add(1)
			h = http.Header{"X-Ratelimit-Resource": {"search"}, "X-Ratelimit-Limit": {"30"},
				"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"60"}}
			status = 429
		}
		return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Throttle: &throttle.Throttle{Rand: admitAll}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/core", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("core: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var o Outcome
	resp, err = tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/search", nil))
	if err != nil {
		t.Fatalf("search: %v; want the 429 returned", err)
	}
	resp.Body.Close()
	if n := search.Load(); n != 1 || o.Reason != Throttled || resp.StatusCode != 429 {
		t.Errorf("search: %d requests sent in the spent search window, reason %s, status %d; want 1 (one 429 per window), throttled, the 429", n, o.Reason, resp.StatusCode)
	}
}

// TestQuotaCountFollowsTheServerAfterARetryEndsInAnError: a retry that
// took a request from the quota and then failed with no response (a
// refused connection: the server never counted it) is no longer in
// flight. A later response in the same window, with nothing else in
// flight, gives the server's count, as the documentation says; here the
// server still has a request left and says so, so the next operation
// must be sent, not refused locally.
func TestQuotaCountFollowsTheServerAfterARetryEndsInAnError(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 4, time.Minute)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	srv.answer = func(r *http.Request, hit int) (int, error) {
		switch hit {
		case 2:
			return 503, nil // counted by the server
		case 3:
			return 0, refused // the retry: never reached the server
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, Jitter: noJitter, MaxAttempts: 2, Throttle: &throttle.Throttle{Rand: admitAll}}
	get := func() (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	}
	resp, err := get() // the server: 3 left
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	_, err = get() // a 503 (2 left), then a retry the server never sees
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("second: %v; want the retry's refused connection", err)
	}
	resp, err = get() // the server: 1 left, and it says so
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("third: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	if srv.left() != 1 {
		t.Fatalf("the server has %d left; want 1", srv.left())
	}
	resp, err = get()
	if err != nil {
		t.Fatalf("fourth, with 1 left at the server and nothing in flight: %v; want it sent", err)
	}
	resp.Body.Close()
}

// TestWaitQuotaRetryWaitsForTheResetWhenTheQuotaIsSpentDuringItsBackoff:
// with WaitQuota, a retry due while its destination's quota is spent
// waits for the reset when MaxRetryAfter and the deadline allow, as
// documented. Here the quota still had a request left when the retry was
// planned; another operation took it during the retry's 1s backoff, so
// at the end of the backoff the quota is spent for 9s more: the retry
// must wait for the reset and then be sent, not be refused.
func TestWaitQuotaRetryWaitsForTheResetWhenTheQuotaIsSpentDuringItsBackoff(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 3, 10*time.Second)
	srv.answer = func(r *http.Request, hit int) (int, error) {
		if hit == 2 {
			return 503, nil
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, Jitter: waits(time.Second), Throttle: &throttle.Throttle{WaitQuota: true, Rand: admitAll}}
	get := func(ctx context.Context) (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, ctx, "GET", "http://api.test/", nil))
	}
	resp, err := get(context.Background()) // 2 left
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	// The 503 (1 left); its retry waits 1s.
	if err := fc.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	resp, err = get(context.Background()) // the last request of the window
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("third: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var r result
	for i := 0; ; i++ {
		select {
		case r = <-ch:
		case <-time.After(20 * time.Millisecond):
			if i > 500 {
				t.Fatal("the retry never ended")
			}
			fc.Advance(time.Second)
			continue
		}
		break
	}
	if r.err != nil {
		t.Fatalf("the retry, with WaitQuota and the reset 9s after its backoff (MaxRetryAfter 30s): %v (reason %s after %d attempts); want it to wait for the reset and be sent", r.err, o.Reason, o.Attempts)
	}
	r.resp.Body.Close()
	if r.resp.StatusCode != 200 || o.Attempts != 2 || o.Waited < 10*time.Second {
		t.Errorf("status %d after %d attempts, waited %v; want 200 after 2, waited at least 10s", r.resp.StatusCode, o.Attempts, o.Waited)
	}
}

// TestWaitQuotaRetryThatCannotWaitStopsThrottled: a retry refused
// because its destination's quota is spent stops with throttled, the
// reason the metrics count quota refusals under. WaitQuota only adds a
// wait when the reset fits: a reset beyond MaxRetryAfter, or past the
// deadline, leaves the retry refused by the quota as without WaitQuota,
// not a Retry-After the server never sent.
func TestWaitQuotaRetryThatCannotWaitStopsThrottled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{
		{"reset beyond MaxRetryAfter", 0},
		{"reset past the deadline", 60 * time.Second},
	} {
		for _, wait := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: ", WaitQuota"}[wait], func(t *testing.T) {
				t.Parallel()
				fc := clockwork.NewFakeClock()
				var hits atomic.Int32
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					hits.Add(1)
					// A 503 whose headers say the quota is spent for 120s.
					h := http.Header{"Ratelimit-Policy": {`"default";q=10;w=120`}, "Ratelimit": {`"default";r=0;t=120`}}
					return &http.Response{StatusCode: 503, Header: h, Body: http.NoBody, Request: r}, nil
				})
				tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Timeout: tc.timeout,
					Throttle: &throttle.Throttle{WaitQuota: wait, Rand: admitAll}}
				var o Outcome
				resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
				if err != nil {
					t.Fatalf("%v; want the 503 returned", err)
				}
				resp.Body.Close()
				if o.Reason != Throttled || hits.Load() != 1 {
					t.Errorf("reason %s, %d sent; want throttled, 1 sent", o.Reason, hits.Load())
				}
			})
		}
	}
}

// TestQuotaRetryRefusedAfterItsWaitReturnsTheLastAttemptsError: an
// operation whose retry is refused returns its last attempt's error, as
// documented ("as when the budget has no token"). Here the retry of a
// reset connection finds, after its backoff, the quota spent by another
// operation: the error must still say the connection was reset, besides
// matching ErrQuotaExhausted.
func TestQuotaRetryRefusedAfterItsWaitReturnsTheLastAttemptsError(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	var hits atomic.Int32
	// A quota of 3 per 10s. The second request is counted, and its
	// connection reset before the answer; the third takes the last.
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		left := "2"
		switch hits.Add(1) {
		case 2:
			return nil, reset
		case 3:
			left = "0"
		}
		h := http.Header{"Ratelimit-Policy": {`"default";q=3;w=10`}, "Ratelimit": {`"default";r=` + left + `;t=10`}}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(time.Second), Throttle: &throttle.Throttle{Rand: admitAll}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	if err := fc.BlockUntilContext(t.Context(), 1); err != nil { // the reset connection's retry waits 1s
		t.Fatal(err)
	}
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("third: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	fc.Advance(time.Second)
	r := await(t, ch)
	if r.err == nil {
		r.resp.Body.Close()
		t.Fatalf("status %d; want the retry refused by the spent quota", r.resp.StatusCode)
	}
	if o.Reason != Throttled || !errors.Is(r.err, throttle.ErrQuotaExhausted) || hits.Load() != 3 {
		t.Fatalf("%v, reason %s, %d sent; want ErrQuotaExhausted, throttled, 3 sent", r.err, o.Reason, hits.Load())
	}
	if !errors.Is(r.err, syscall.ECONNRESET) {
		t.Errorf("%v; want the last attempt's error (connection reset) in the chain", r.err)
	}
}
