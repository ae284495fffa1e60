package httpretry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeExtraLoadCapOverManyOperations: over many operations, hedges stay within the extra-load cap, a burst of 10 plus twice MaxExtraLoad per operation, and Outcome.Hedges counts every hedge the server saw.
func TestHedgeExtraLoadCapOverManyOperations(t *testing.T) {
	realTime(t)
	var hits atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		hits.Add(1)
		select {
		case <-time.After(4 * time.Millisecond):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		return response(req, 200, "ok"), nil
	})
	const ops = 300
	tr := &Transport{Base: base, MaxAttempts: 3, Budget: Unlimited,
		Hedging: &Hedging{Delay: time.Millisecond, MaxExtraLoad: 0.02}}
	hedges := 0
	for i := range ops {
		var o Outcome
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		resp.Body.Close()
		hedges += o.Hedges
	}
	// The cap refills at twice MaxExtraLoad (Hedging.MaxExtraLoad's
	// doc), so that late answers bunched together do not find it empty.
	limit := 10 + int(hedgeHeadroom*0.02*ops) + 1
	if hedges > limit {
		t.Errorf("%d hedges over %d operations; want at most %d", hedges, ops, limit)
	}
	if got := int(hits.Load()) - ops; got != hedges {
		t.Errorf("server saw %d extra requests; Outcome.Hedges summed to %d", got, hedges)
	}
}

// TestHedgeUnboundedKeysStayBounded: a Key returning a new value for
// every request keeps at most MaxKeys distributions, the latest keys'.
func TestHedgeUnboundedKeysStayBounded(t *testing.T) {
	var n atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) { return response(req, 200, "ok"), nil })
	tr := &Transport{Base: base, Hedging: &Hedging{MaxKeys: 4, Key: func(*http.Request) string { return fmt.Sprint(n.Add(1)) }}}
	for range 500 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s := tr.latencies()
	if keys := s.Len(); keys != 4 {
		t.Errorf("%d keys kept; want MaxKeys = 4", keys)
	}
	if s.Find("500") == nil || s.Find("1") != nil {
		t.Error("want the last key held and the first evicted")
	}
}

// TestHedgeRefusedNotLoggedAboveDebug: once the extra-load cap is empty, refused hedges are counted in Outcome.HedgesRefused but leave no record at Info level or above: a whole slow server would otherwise log one per operation.
func TestHedgeRefusedNotLoggedAboveDebug(t *testing.T) {
	realTime(t)
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		return response(req, 200, "ok"), nil
	})
	h := &panicRecords{got: make(chan struct{}, 1)}
	tr := &Transport{Base: base, MaxAttempts: 2, Budget: Unlimited, Logger: slog.New(h),
		Hedging: &Hedging{Delay: time.Millisecond, MaxExtraLoad: 0.01}}
	refused := 0
	for range 30 { // the burst of 10 is spent by the first 10
		var o Outcome
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		refused += o.HedgesRefused
	}
	if refused == 0 {
		t.Fatal("no hedge refused over 30 slow operations; want the cap to refuse those past the burst")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	debug := 0
	for _, r := range h.records {
		if r.Message != "httpretry: hedge refused" {
			continue
		}
		if r.Level >= slog.LevelInfo {
			t.Fatalf("hedge refused logged at %v; want Debug", r.Level)
		}
		debug++
	}
	if debug != refused {
		t.Errorf("%d Debug records of refused hedges; Outcome.HedgesRefused summed to %d", debug, refused)
	}
}
