package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// spentOnceBase answers its first request 429 with the quota spent and
// resetting in 2s, in X-RateLimit fields and without Retry-After, and
// every later one 200 with the quota open.
type spentOnceBase struct{ hits atomic.Int32 }

func (b *spentOnceBase) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"9"}, "X-Ratelimit-Reset": {"2"}}
	status := 200
	if b.hits.Add(1) == 1 {
		h.Set("X-Ratelimit-Remaining", "0")
		status = 429
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
}

func (b *spentOnceBase) Hits() int { return int(b.hits.Load()) }

// TestQuotaRefusesARetryBeforeTheReset: a 429 that says the quota is
// spent for 2s is not retried after a backoff that ends before the
// reset, where it would meet another 429: the operation stops with
// throttled and returns the 429, one request sent, no budget token taken.
func TestQuotaRefusesARetryBeforeTheReset(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &spentOnceBase{}
	budget := NewTokenBucket(5, 0)
	tr := &Transport{Base: base, Clock: fc, Budget: budget, Throttle: &throttle.Throttle{}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("got %v, %v; want the 429", resp, err)
	}
	resp.Body.Close()
	if o.Reason != Throttled || o.Attempts != 1 || base.Hits() != 1 || budget.Tokens() != 5 {
		t.Fatalf("reason %s after %d attempts, %d sent, %v tokens; want throttled after 1, 1 sent, 5 tokens", o.Reason, o.Attempts, base.Hits(), budget.Tokens())
	}
}

// TestQuotaRetryWaitsForTheReset: with WaitQuota the retry of that 429
// waits for the reset, 2s, as for a Retry-After (the jitter on top of it
// is 0 here), not a backoff, and is then sent and answered.
func TestQuotaRetryWaitsForTheReset(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &spentOnceBase{}
	noJitter := func(time.Duration) time.Duration { return 0 }
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Throttle: &throttle.Throttle{WaitQuota: true}}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advanceAt(t, fc, base, 1, 1, 2*time.Second-time.Millisecond)
	if base.Hits() != 1 {
		t.Fatalf("%d requests a millisecond before the reset; want 1", base.Hits())
	}
	advance(t, fc, 1, time.Millisecond)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 || o.Attempts != 2 || o.Waited != 2*time.Second {
		t.Fatalf("got %v, %v after %d attempts, waited %v; want 200 after 2, waited 2s", r.resp, r.err, o.Attempts, o.Waited)
	}
	r.resp.Body.Close()
}

// TestQuotaRetryPastTheResetTakesFromTheQuota: a retry sent after the
// reset takes a request from the renewed window, as a new operation
// does: with one request a window, the retry takes it, and the quota is
// spent for the rest of that window.
func TestQuotaRetryPastTheResetTakesFromTheQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var hits atomic.Int32
	var mu sync.Mutex
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		// A quota of 1 a second; the first answer is a 503 that spends
		// it, the next a 200 that says nothing of the quota.
		h := http.Header{}
		status := 200
		if hits.Add(1) == 1 {
			h = http.Header{"Ratelimit-Policy": {`"default";q=1;w=1`}, "Ratelimit": {`"default";r=0;t=1`}}
			status = 503
		}
		return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
	})
	noJitter := func(time.Duration) time.Duration { return 0 }
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Throttle: &throttle.Throttle{WaitQuota: true}}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	// The retry waits for the reset, 1s after the 503.
	advance(t, fc, 1, time.Second)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 || o.Attempts != 2 {
		t.Fatalf("got %v, %v after %d attempts; want 200 after 2", r.resp, r.err, o.Attempts)
	}
	r.resp.Body.Close()
	// Still in the window the retry took from: spent, though the retry's
	// answer said nothing of the quota.
	th := tr.Throttle
	if _, spent := th.QuotaSpent(th.Dest(newRequest(t, context.Background(), "GET", "http://api.test/", nil)), nil, fc.Now()); !spent || hits.Load() != 2 {
		t.Fatalf("quota spent %v after the retry, %d sent; want spent, 2 sent", spent, hits.Load())
	}
}

// TestQuotaRefusesAHedge: a hedge takes from the quota as a retry does:
// with the last request of the window taken by the first attempt, the
// hedge due after 10ms is refused, not sent, and the first attempt's
// answer still comes back.
func TestQuotaRefusesAHedge(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var hits atomic.Int32
	release := make(chan struct{})
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"Ratelimit-Policy": {`"default";q=2;w=10`}, "Ratelimit": {`"default";r=1;t=10`}}
		if hits.Add(1) == 2 {
			<-release
		}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
	})
	var refused atomic.Int32
	logger := slog.New(countingHandler{msg: "httpretry: hedge refused", n: &refused})
	tr := &Transport{Base: base, Clock: fc, Logger: logger, Throttle: &throttle.Throttle{}, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	for deadline := time.Now().Add(5 * time.Second); hits.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt was not sent")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, 1, 10*time.Millisecond)
	// The hedge is decided before the first attempt may answer.
	for deadline := time.Now().Add(5 * time.Second); refused.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no hedge refused; %d requests", hits.Load())
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	close(release)
	r := await(t, ch)
	if r.err != nil || o.Hedges != 0 || o.HedgesRefused != 1 || hits.Load() != 2 {
		t.Fatalf("%v; %d hedges, %d refused, %d requests; want the first attempt's answer, 0 hedges, 1 refused, 2 requests", r.err, o.Hedges, o.HedgesRefused, hits.Load())
	}
	r.resp.Body.Close()
}

// countingHandler counts the log records whose message is msg.
type countingHandler struct {
	msg string
	n   *atomic.Int32
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

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
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Throttle: drawing(&throttle.Throttle{}, admitAll)}
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
	tr := &Transport{Base: srv, Clock: fc, Jitter: noJitter, MaxAttempts: 2, Throttle: drawing(&throttle.Throttle{}, admitAll)}
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
	realTime(t)
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 3, 10*time.Second)
	srv.answer = func(r *http.Request, hit int) (int, error) {
		if hit == 2 {
			return 503, nil
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, Jitter: waits(time.Second), Throttle: drawing(&throttle.Throttle{WaitQuota: true}, admitAll)}
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
	awaitWaiters(t, fc, 1)
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
					Throttle: drawing(&throttle.Throttle{WaitQuota: wait}, admitAll)}
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
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(time.Second), Throttle: drawing(&throttle.Throttle{}, admitAll)}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	awaitWaiters(t, fc, 1) // the reset connection's retry waits 1s
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

// TestQuotaHedgeThatCannotBeSentReturnsItsRequestToTheQuota: a hedge
// takes a request from the quota with its budget token; when no body can
// be made for it (GetBody fails) it is not sent, and the budget and the
// extra-load cap get their tokens back. The quota must get its request
// back too: here the server's window of 4 still has 2 left after the
// hedged operation, and the next two operations must both be sent.
func TestQuotaHedgeThatCannotBeSentReturnsItsRequestToTheQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 4, time.Minute)
	release := make(chan struct{})
	srv.answer = func(r *http.Request, hit int) (int, error) {
		if r.Method == http.MethodPut {
			<-release // the first attempt is still running when the hedge is due
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, Throttle: drawing(&throttle.Throttle{}, admitAll),
		Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	get := func() (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	}
	resp, err := get() // 3 left
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var bodies atomic.Int32
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", bytes.NewReader([]byte("x")))
	req.GetBody = func() (io.ReadCloser, error) {
		bodies.Add(1)
		return nil, errors.New("no body for a second attempt")
	}
	var o Outcome
	ch := start(tr, req.WithContext(WithOutcome(req.Context(), &o)))
	for deadline := time.Now().Add(5 * time.Second); srv.Hits() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt was not sent")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, 1, 10*time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); bodies.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no hedge was asked for a body")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	close(release)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 || o.Hedges != 0 {
		t.Fatalf("hedged: %v, %v, %d hedges; want the first attempt's 200, no hedge sent", r.resp, r.err, o.Hedges)
	}
	r.resp.Body.Close()
	if srv.left() != 2 {
		t.Fatalf("the server has %d left; want 2", srv.left())
	}
	for i := range 2 {
		resp, err := get()
		if err != nil {
			t.Fatalf("operation %d of the 2 the server's window still admits: %v; want it sent", i+1, err)
		}
		resp.Body.Close()
	}
}

// failingBody is a request body whose reads fail.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("the body's source failed") }
func (failingBody) Close() error             { return nil }

// TestQuotaOperationThatFailsBeforeItsAttemptReturnsItsRequestToTheQuota:
// an operation admitted by the quota that then fails before any attempt
// (its body cannot be read into memory for retries) sent nothing: its
// request goes back to the quota. The server's window of 2 still has 1
// left, and the next operation must be sent, not refused locally.
func TestQuotaOperationThatFailsBeforeItsAttemptReturnsItsRequestToTheQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 2, time.Minute)
	tr := &Transport{Base: srv, Clock: fc, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil)) // 1 left
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", nil)
	req.Body, req.ContentLength = failingBody{}, 5
	var o Outcome
	_, err = tr.RoundTrip(req.WithContext(WithOutcome(req.Context(), &o)))
	if err == nil || o.Attempts != 0 || srv.Hits() != 1 {
		t.Fatalf("the unreadable body: %v after %d attempts, %d sent; want an error before any attempt", err, o.Attempts, srv.Hits())
	}
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatalf("with 1 left at the server, nothing sent since: %v; want it sent", err)
	}
	resp.Body.Close()
}
