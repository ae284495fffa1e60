package httpretry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeDelayCountsFromTheFirstAttemptsSendWhenAnotherAlarmRings: the
// hedge delay is how long an attempt may go unanswered before a hedge
// (docs/hedging.md), so it counts from when the first attempt is sent,
// not from before a slow OnAttemptStart of it; the delays of every
// Transport on the system clock ring from one timer, which another
// Transport's delay may make ring at any time. B1 (delay 50ms) and B2 (delay 200ms) start together, each with
// a first OnAttemptStart of 300ms; B2's returns once B1's first attempt is
// sent. B2's first attempt, sent then, goes unanswered: its hedge must
// not start before 200ms passed since its OnAttemptStart returned, even
// though B1's delay rings 50ms after B1's first attempt was sent.
func TestHedgeDelayCountsFromTheFirstAttemptsSendWhenAnotherAlarmRings(t *testing.T) {
	const d1, d2, hook = 50 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond
	b1Sent := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var b2HookReturned, b2Hedge time.Time

	blockFirst := func(req *http.Request, first bool) (*http.Response, error) {
		if first {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return response(req, 200, "ok"), nil
	}
	var b1Calls, b2Calls atomic.Int32
	tr1 := &Transport{
		Hedging: &Hedging{Delay: d1}, Budget: Unlimited,
		OnDone: func(*http.Request, Outcome) {},
		OnAttemptStart: func(req *http.Request, n int) {
			if n == 1 {
				time.Sleep(hook)
			}
		},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			first := b1Calls.Add(1) == 1
			if first {
				once.Do(func() { close(b1Sent) })
			}
			return blockFirst(req, first)
		}),
	}
	tr2 := &Transport{
		Hedging: &Hedging{Delay: d2}, Budget: Unlimited,
		OnDone: func(*http.Request, Outcome) {},
		OnAttemptStart: func(req *http.Request, n int) {
			if n == 1 {
				<-b1Sent
				mu.Lock()
				b2HookReturned = time.Now()
				mu.Unlock()
				return
			}
			mu.Lock()
			if b2Hedge.IsZero() {
				b2Hedge = time.Now()
			}
			mu.Unlock()
		},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return blockFirst(req, b2Calls.Add(1) == 1)
		}),
	}
	var wg sync.WaitGroup
	for _, tr := range []*Transport{tr1, tr2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://b.test/", nil))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if gap := b2Hedge.Sub(b2HookReturned); gap < d2 {
		t.Errorf("B2's hedge started %v after its first attempt's OnAttemptStart returned (its first attempt sent after); want at least its delay, %v", gap, d2)
	}
}
