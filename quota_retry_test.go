package httpretry

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
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
