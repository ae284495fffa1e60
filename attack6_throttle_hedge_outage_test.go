package httpretry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack6HedgeLosersHideOutage: a server in a full outage. Every
// first attempt is answered "503, X-Should-Retry: false" (an overload
// signal, and final), but only after the hedge delay, and every hedge
// hangs, never answered. Each operation sends its first attempt and a
// hedge; the 503 wins and the hanging hedge is canceled as a loser. The
// server accepted nothing, yet each canceled loser is counted as a
// request AND an accept (recordLoser), so requests − K·accepts = 2N − 2N
// = 0 and the throttle never refuses: the outage is hidden. docs/overload.md
// and issue 23 promise the throttle cuts outage load to ≤ 0.25× and that
// "accepted" means the server did not signal overload.
func TestAttack6HedgeLosersHideOutage(t *testing.T) {
	const ms = time.Millisecond
	fc := clockwork.NewFakeClock()
	var firsts, hedges atomic.Int32
	var probe atomic.Bool
	gate := make(chan struct{})
	first := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp := response(req, 503, "down")
		resp.Header.Set("X-Should-Retry", "false")
		if probe.Load() {
			return resp, nil
		}
		firsts.Add(1)
		select {
		case <-gate:
			return resp, nil
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	})
	hang := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		hedges.Add(1)
		<-req.Context().Done() // the server never answers
		return nil, req.Context().Err()
	})
	var draw atomic.Uint64
	draw.Store(math.Float64bits(0.9999)) // refuse nothing while counting
	th := &throttle.Throttle{Rand: func() float64 { return math.Float64frombits(draw.Load()) }}
	tr := &Transport{Base: first, Clock: fc, MaxAttempts: 2, Budget: NewTokenBucket(1e9, 1), Throttle: th,
		Hedging: &Hedging{Delay: 10 * ms, MaxExtraLoad: 0.999, Base: hang}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor := func(c *atomic.Int32, n int32) {
		for deadline := time.Now().Add(5 * time.Second); c.Load() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for attempt %d", n)
			}
			time.Sleep(50 * time.Microsecond) // a poll, not a timing assumption
		}
	}
	for i := range int32(200) { // 2 s of outage, one operation each 10 ms
		ch := start(tr, newRequest(t, ctx, "GET", "http://down.test/", nil))
		waitFor(&firsts, i+1)
		advance(t, fc, 1, 10*ms) // the hedge delay
		waitFor(&hedges, i+1)
		gate <- struct{}{} // the first attempt's 503 wins
		r := await(t, ch)
		if r.err != nil || r.resp.StatusCode != 503 {
			t.Fatalf("operation %d: %v; want the 503", i, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(10 * ms)
	}
	// Every attempt of the last 2 s was a 503 or went unanswered: the
	// throttle's p is at its cap (0.9). A draw of 0.5 must be refused.
	probe.Store(true)
	draw.Store(math.Float64bits(0.5))
	r := await(t, start(tr, newRequest(t, ctx, "GET", "http://down.test/", nil)))
	if !errors.Is(r.err, throttle.ErrThrottled) {
		if r.err == nil {
			r.resp.Body.Close()
		}
		t.Errorf("after 2 s in which the server answered 200 operations only with 503 (X-Should-Retry: false) and never answered their 200 hedges, a draw of 0.5 was admitted (err %v); want ErrThrottled (p at MaxReject 0.9): canceled hedge losers of a down server are counted as accepts, so the throttle never refuses during the outage (issue 23: outage load ≤ 0.25×; an accept is an attempt the server did not signal overload on)", r.err)
	}
}
