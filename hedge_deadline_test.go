package httpretry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLearnedAttemptTimeoutWithinDeadline: an attempt limit learned from slow traffic never reaches past the operation's deadline, for the first attempt and for hedges.
func TestLearnedAttemptTimeoutWithinDeadline(t *testing.T) {
	realTime(t)
	var mu sync.Mutex
	var deadlines []time.Time
	var warm atomic.Bool
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if !warm.Load() {
			time.Sleep(20 * time.Millisecond)
			return response(req, 200, "ok"), nil
		}
		d, ok := req.Context().Deadline()
		mu.Lock()
		if ok {
			deadlines = append(deadlines, d)
		} else {
			deadlines = append(deadlines, time.Time{})
		}
		mu.Unlock()
		<-req.Context().Done()
		return nil, req.Context().Err()
	})
	tr := &Transport{Base: base, MaxAttempts: 2, Hedging: &Hedging{Delay: 30 * time.Millisecond},
		LearnAttemptTimeout: &LearnedTimeout{MinSamples: 1, Min: time.Hour}}
	for range 3 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	warm.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	callerDeadline, _ := ctx.Deadline()
	if _, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example/items", nil)); err == nil {
		t.Fatal("RoundTrip succeeded; want the deadline to end it")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) == 0 {
		t.Fatal("no attempt")
	}
	for i, d := range deadlines {
		if d.IsZero() || d.After(callerDeadline) {
			t.Errorf("attempt %d: deadline %v; want at most the caller's %v", i+1, d, callerDeadline)
		}
	}
}

// TestHedgeNotSentWithoutMinAttemptTimeLeft: no hedge starts when less than MinAttemptTime is left before the deadline at its delay.
func TestHedgeNotSentWithoutMinAttemptTimeLeft(t *testing.T) {
	realTime(t)
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		hits.Add(1)
		<-req.Context().Done()
		return nil, req.Context().Err()
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Timeout: 300 * time.Millisecond, MinAttemptTime: 200 * time.Millisecond,
		Hedging: &Hedging{Delay: 150 * time.Millisecond}}
	var o Outcome
	if _, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil)); err == nil {
		t.Fatal("RoundTrip succeeded")
	}
	if hits.Load() != 1 || o.Hedges != 0 || o.Attempts != 1 {
		t.Errorf("hits %d, outcome %+v; want one attempt and no hedge", hits.Load(), o)
	}
}
