package httpretry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeFallbackRetryHonoursEarlierRetryAfter: when every attempt has failed, the retry waits out a Retry-After that any failed attempt of the operation received.
func TestHedgeFallbackRetryHonoursEarlierRetryAfter(t *testing.T) {
	secondsOfRealTime(t)
	var mu sync.Mutex
	var starts []time.Time
	var raAnswered time.Time
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		n := len(starts)
		mu.Unlock()
		switch n {
		case 1: // the first attempt: slow, then a 503 without Retry-After
			select {
			case <-time.After(time.Second):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return response(req, 503, "busy"), nil
		case 2: // the hedge: a 503 asking for 2s at once
			resp := response(req, 503, "later")
			resp.Header.Set("Retry-After", "2")
			mu.Lock()
			raAnswered = time.Now()
			mu.Unlock()
			return resp, nil
		}
		return response(req, 200, "ok"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Timeout: 20 * time.Second, BaseDelay: time.Millisecond,
		Hedging: &Hedging{Delay: 20 * time.Millisecond}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v (outcome %+v)", err, o)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 {
		t.Fatalf("%d attempts; want 3 (first, hedge, retry), outcome %+v", len(starts), o)
	}
	// A lower bound only: a busy machine makes the gap longer, never shorter.
	if gap := starts[2].Sub(raAnswered); gap < 1900*time.Millisecond {
		t.Errorf("retry sent %v after the server asked for 2s (outcome %+v)", gap, o)
	}
}

// TestHedgeFallbackRetryStopsOnEarlierRetryAfter: the stop rules of Retry-After see one a discarded hedge received: the fallback retry stops as retry_after_exceeds_deadline or retry_after_too_long rather than sending early.
func TestHedgeFallbackRetryStopsOnEarlierRetryAfter(t *testing.T) {
	realTime(t)
	for _, tc := range []struct {
		name          string
		timeout       time.Duration
		maxRetryAfter time.Duration
		want          StopReason
	}{
		{"exceeds deadline", 2 * time.Second, 0, RetryAfterExceedsDeadline},
		{"too long", 30 * time.Second, 3 * time.Second, RetryAfterTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				switch hits.Add(1) {
				case 1: // slow, then a 503 without Retry-After
					select {
					case <-time.After(300 * time.Millisecond):
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
					return response(req, 503, "busy"), nil
				case 2: // the hedge: a 503 asking for 10s
					resp := response(req, 503, "later")
					resp.Header.Set("Retry-After", "10")
					return resp, nil
				}
				return response(req, 200, "ok"), nil
			})
			tr := &Transport{Base: base, MaxAttempts: 3, Timeout: tc.timeout, MaxRetryAfter: tc.maxRetryAfter,
				BaseDelay: time.Millisecond, Budget: &onceRefusingBudget{}, Hedging: &Hedging{Delay: 20 * time.Millisecond}}
			var o Outcome
			resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v; want the last 503 returned", err)
			}
			// The stop hands back the last answer, the first attempt's.
			if got := readBody(t, resp); resp.StatusCode != 503 || got != "busy" {
				t.Errorf("answer %d %q; want 503 busy", resp.StatusCode, got)
			}
			if o.Reason != tc.want || hits.Load() != 2 || o.Attempts != 2 {
				t.Errorf("outcome %+v, %d hits; want %s after 2 attempts", o, hits.Load(), tc.want)
			}
		})
	}
}

// TestHedgeAfterARetryAfterWaitsForIt: the first attempt is slow (3s);
// the hedge sent after 20ms is answered 429 with "Retry-After: 1". The
// next copy, a hedge while the first attempt still runs, goes out no
// sooner than a second after that answer: Retry-After is a minimum for
// every copy that follows, hedge or retry.
func TestHedgeAfterARetryAfterWaitsForIt(t *testing.T) {
	realTime(t)
	t.Parallel()
	var mu sync.Mutex
	var starts []time.Time
	var raAnswered time.Time
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		n := len(starts)
		mu.Unlock()
		switch n {
		case 1:
			select {
			case <-time.After(3 * time.Second):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return response(req, 200, "slow"), nil
		case 2:
			resp := response(req, 429, "later")
			resp.Header.Set("Retry-After", "1")
			mu.Lock()
			raAnswered = time.Now()
			mu.Unlock()
			return resp, nil
		}
		return response(req, 200, "ok"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Hedging: &Hedging{Delay: 20 * time.Millisecond}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v (outcome %+v)", err, o)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 {
		t.Fatalf("%d attempts; want 3 (first, hedge, the copy after the Retry-After), outcome %+v", len(starts), o)
	}
	// A lower bound only: a busy machine makes the gap longer, never shorter.
	if gap := starts[2].Sub(raAnswered); gap < 900*time.Millisecond {
		t.Errorf("next copy sent %v after the server asked for 1s (outcome %+v)", gap, o)
	}
}
