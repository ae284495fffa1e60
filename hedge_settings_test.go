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

// TestHedgingSettingsResolveTheirZeroValues: each Hedging and
// LearnedTimeout setting left at zero, or set out of its range, means its
// default; a value at the edge of its range is taken as it is.
func TestHedgingSettingsResolveTheirZeroValues(t *testing.T) {
	t.Parallel()
	ints := []struct {
		name      string
		got, want int
	}{
		{"Hedging.MinSamples 0", (&Hedging{}).minSamples(), DefaultHedgeMinSamples},
		{"Hedging.MinSamples -1", (&Hedging{MinSamples: -1}).minSamples(), DefaultHedgeMinSamples},
		{"Hedging.MinSamples 1", (&Hedging{MinSamples: 1}).minSamples(), 1},
		{"no Hedging's MaxKeys", (*Hedging)(nil).maxKeys(), DefaultHedgeMaxKeys},
		{"Hedging.MaxKeys 0", (&Hedging{}).maxKeys(), DefaultHedgeMaxKeys},
		{"Hedging.MaxKeys 1", (&Hedging{MaxKeys: 1}).maxKeys(), 1},
		{"LearnedTimeout.MinSamples 0", (&LearnedTimeout{}).minSamples(), defaultLearnedMinSamples},
		{"LearnedTimeout.MinSamples 1", (&LearnedTimeout{MinSamples: 1}).minSamples(), 1},
	}
	for _, tt := range ints {
		if tt.got != tt.want {
			t.Errorf("%s: %d; want %d", tt.name, tt.got, tt.want)
		}
	}
	floats := []struct {
		name      string
		got, want float64
	}{
		{"Hedging.MaxExtraLoad 0", (&Hedging{}).maxExtraLoad(), DefaultMaxExtraLoad},
		{"Hedging.MaxExtraLoad 1", (&Hedging{MaxExtraLoad: 1}).maxExtraLoad(), DefaultMaxExtraLoad},
		{"Hedging.MaxExtraLoad 0.1", (&Hedging{MaxExtraLoad: 0.1}).maxExtraLoad(), 0.1},
		{"LearnedTimeout.Quantile 0", (&LearnedTimeout{}).quantile(), defaultLearnedQuantile},
		{"LearnedTimeout.Quantile 1", (&LearnedTimeout{Quantile: 1}).quantile(), defaultLearnedQuantile},
		{"LearnedTimeout.Quantile 0.5", (&LearnedTimeout{Quantile: 0.5}).quantile(), 0.5},
		{"LearnedTimeout.Factor 0", (&LearnedTimeout{}).factor(), defaultLearnedFactor},
		{"LearnedTimeout.Factor 0.99", (&LearnedTimeout{Factor: 0.99}).factor(), defaultLearnedFactor},
		{"LearnedTimeout.Factor 1", (&LearnedTimeout{Factor: 1}).factor(), 1},
	}
	for _, tt := range floats {
		if tt.got != tt.want {
			t.Errorf("%s: %v; want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestHedgeDelayIsTheQuantileMaxExtraLoadLeaves: with no fixed Delay, a
// key's hedge delay is the latency that 1 − MaxExtraLoad of its requests
// beat: of 100 latencies of 1ms to 100ms and MaxExtraLoad 0.1, about
// 90ms. A fixed Delay is the delay as it is; with room for one attempt
// only (MaxAttempts 1) nothing is hedged, with two it is.
func TestHedgeDelayIsTheQuantileMaxExtraLoadLeaves(t *testing.T) {
	t.Parallel()
	tr := &Transport{MaxAttempts: 2, Hedging: &Hedging{MinSamples: 10, MaxExtraLoad: 0.1, MinDelay: time.Millisecond}}
	d := tr.latencies().Lookup("api.test:443")
	for i := range 100 {
		d.Record(time.Duration(i+1)*time.Millisecond, false, time.Time{})
	}
	delay, ok := tr.HedgeDelay("api.test:443")
	if !ok || delay < 85*time.Millisecond || delay > 95*time.Millisecond {
		t.Errorf("HedgeDelay = %v, %v; want about 90ms, true", delay, ok)
	}
	fixed := &Transport{MaxAttempts: 2, Hedging: &Hedging{Delay: 5 * time.Millisecond}}
	if delay, ok := fixed.HedgeDelay("api.test:443"); !ok || delay != 5*time.Millisecond {
		t.Errorf("fixed Delay: HedgeDelay = %v, %v; want 5ms, true", delay, ok)
	}
	fixed.MaxAttempts = 1
	if delay, ok := fixed.HedgeDelay("api.test:443"); ok {
		t.Errorf("MaxAttempts 1: HedgeDelay = %v, %v; want no hedge", delay, ok)
	}
}
