package httpretry

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeAllAttemptsFailCountsConsistent: when every attempt fails with 503, each non-fatal answer starts the next hedge at once, the operation returns the last 503 after MaxAttempts, and Outcome and OnAttempt count every attempt once.
func TestHedgeAllAttemptsFailCountsConsistent(t *testing.T) {
	realTime(t)
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

// TestHedgingOutOfRangeSettingsMeanDefaults: MaxExtraLoad outside (0, 1), NaN included, means 0.02, and MinDelay not positive means 1ms.
func TestHedgingOutOfRangeSettingsMeanDefaults(t *testing.T) {
	for _, v := range []float64{0, -1, 1, 2, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := (&Hedging{MaxExtraLoad: v}).maxExtraLoad(); got != DefaultMaxExtraLoad {
			t.Errorf("MaxExtraLoad %v resolves to %v; want %v", v, got, DefaultMaxExtraLoad)
		}
	}
	if got := (&Hedging{MaxExtraLoad: 0.5}).maxExtraLoad(); got != 0.5 {
		t.Errorf("MaxExtraLoad 0.5 resolves to %v", got)
	}
	for _, v := range []time.Duration{0, -time.Hour} {
		if got := (&Hedging{MinDelay: v}).minDelay(); got != DefaultMinHedgeDelay {
			t.Errorf("MinDelay %v resolves to %v; want %v", v, got, DefaultMinHedgeDelay)
		}
	}
}

// TestHedgeDelayFalseWhenMaxAttemptsForbidsHedges: HedgeDelay reports false when no request would be hedged at all, as with MaxAttempts 1.
func TestHedgeDelayFalseWhenMaxAttemptsForbidsHedges(t *testing.T) {
	tr := &Transport{MaxAttempts: 1, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	if d, ok := tr.HedgeDelay("api.example"); ok {
		t.Errorf("HedgeDelay = %v, true; want false: with MaxAttempts 1 nothing is hedged", d)
	}
}
