package httpretry

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// Expected: when every attempt fails with 503, each non-fatal answer starts the next hedge at once, the operation returns the last 503 after MaxAttempts, and Outcome and OnAttempt count every attempt once.
func TestHedgeAllAttemptsFailCountsConsistent(t *testing.T) {
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			select { // the first attempt fails late
			case <-time.After(time.Second):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return response(req, 503, "busy"), nil
	})
	var reported atomic.Int32
	tr := &Transport{Base: base, MaxAttempts: 4, Budget: Unlimited,
		Hedging:   &Hedging{Delay: 20 * time.Millisecond},
		OnAttempt: func(*http.Request, Attempt) { reported.Add(1) }}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || o.Attempts != 4 || int(hits.Load()) != 4 || int(reported.Load()) != 4 ||
		o.Hedges != 3 || o.Reason != AttemptsExhausted || o.LosersCanceled != 0 || o.Winner != 1 {
		t.Errorf("status %d, hits %d, reported %d, outcome %+v; want 4 attempts (3 hedges), the first's 503 last, attempts exhausted",
			resp.StatusCode, hits.Load(), reported.Load(), o)
	}
}
