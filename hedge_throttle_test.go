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

// TestHedgeLoserCanceledWithoutAnAnswerIsNotCountedTwice: a hedged
// operation whose first attempt hangs and whose hedge answers, against a
// destination with a known quota, sends two attempts: each takes a
// request from the quota, the loser is canceled without an answer and the
// winner's answer is read. The Throttle counts both as requests, and
// the quota still admits the next operation. (That the canceled loser's
// count in flight ends is held by the throttle package's
// TestRecordCanceledEndsItsQuotaCountInFlight.)
func TestHedgeLoserCanceledWithoutAnAnswerIsNotCountedTwice(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 2 { // the hedged operation's first attempt hangs
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		resp := response(req, 200, "ok")
		resp.Header.Set("X-RateLimit-Remaining", "50")
		resp.Header.Set("X-RateLimit-Reset", "60")
		return resp, nil
	})
	th := &throttle.Throttle{}
	tr := &Transport{Base: base, Clock: fc, Throttle: th}
	// The first answer makes the quota known.
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hedged := &Transport{Base: base, Clock: fc, Throttle: th, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	var o Outcome
	ch := start(hedged, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advanceAt(t, fc, hitCount{&hits}, 2, 1, 10*time.Millisecond)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if o.Hedges != 1 || o.LosersCanceled != 1 {
		t.Fatalf("outcome %+v; want one hedge and one loser canceled", o)
	}
	if err := get(t, tr, "http://api.test/"); err != nil {
		t.Errorf("the next operation, 47 of the quota's 50 left: %v; want it sent", err)
	}
}

// TestThrottleRecoversWithHedgingAfterOneOverloadSignal: a healthy
// destination whose first attempts are slow and whose hedges answer (a
// slow backend, and Hedging.Base reaching another pool): every operation
// sends two attempts, the hedge wins, the first is canceled. The server
// answers one 503 once, then 200 to everything for 6 seconds, and the
// throttle, at K = 1.5 (the least K it uses), refuses almost nothing once the
// 503 has left the window: a loser canceled for a healthy answer counts as
// an accept, so the losers alone never push the refusal probability up,
// and the destination turns cold five windows after its last signal.
func TestThrottleRecoversWithHedgingAfterOneOverloadSignal(t *testing.T) {
	realTime(t)
	t.Parallel()
	if refused, hedges := hedgedRefusals(t, 1.5, 1); refused+hedges > 15 {
		t.Errorf("K 1.5, one hedge per operation: 3s to 6s after the only overload signal, the server answering every attempt: %d of 300 operations refused with ErrThrottled, %d hedges refused; want at most 15 refusals in all (docs/overload.md: a healthy phase refuses nothing; 95%% admitted again about 1.1s after a server heals)", refused, hedges)
	}
}

// TestThrottleRecoversWithTwoHedgesAfterOneOverloadSignal: as above with
// the zero Throttle (K 2) and two hedges per operation (MaxAttempts 3, the
// default): three attempts per accepted one. After the one 503 the
// throttle stops refusing hedges: a healthy phase refuses nothing.
func TestThrottleRecoversWithTwoHedgesAfterOneOverloadSignal(t *testing.T) {
	realTime(t)
	t.Parallel()
	if refused, hedges := hedgedRefusals(t, 0, 2); refused+hedges > 15 {
		t.Errorf("zero Throttle (K 2), two hedges per operation: 3s to 6s after the only overload signal, the server answering every attempt: %d of 300 operations refused with ErrThrottled, %d hedges refused; want at most 15 refusals in all (docs/overload.md: a healthy phase refuses nothing; 95%% admitted again about 1.1s after a server heals)", refused, hedges)
	}
}

// hedgedRefusals runs the scenario: one 503, then 600 operations 10ms
// apart to a server that answers every attempt, each sending hedges
// hedges, the last of which answers first. It returns how many of the
// last 300 the throttle refused.
func hedgedRefusals(t *testing.T, k float64, hedges int) (refused, hedgesRefused int) {
	const ms = time.Millisecond
	fc := clockwork.NewFakeClock()
	var hits, phase atomic.Int32
	slow := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 { // the one overload signal
			resp := response(req, 503, "")
			resp.Header.Set("X-Should-Retry", "false")
			return resp, nil
		}
		phase.Store(0)
		select { // slower than the hedges
		case <-fc.After(time.Duration(5+10*hedges) * time.Millisecond):
			return response(req, 200, "slow"), nil
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	})
	fast := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if int(phase.Add(1)) < hedges { // all but the last hedge are slow too
			select {
			case <-fc.After(time.Duration(5+10*hedges) * time.Millisecond):
				return response(req, 200, "slow"), nil
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return response(req, 200, "ok"), nil
	})
	var i atomic.Int64
	th := drawing(&throttle.Throttle{K: k}, func() float64 { // an even spread of draws
		return math.Mod(float64(i.Add(1))*0.6180339887, 1)
	})
	tr := &Transport{Base: slow, Clock: fc, MaxAttempts: 1 + hedges, Budget: NewTokenBucket(1e9, 1), Throttle: th,
		Hedging: &Hedging{Delay: 10 * ms, MaxExtraLoad: 0.999, Base: fast}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := func() (refused bool, hedgesRefused int) {
		n := hits.Load()
		var o Outcome
		ch := start(tr, newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil))
		for {
			select {
			case r := <-ch:
				if r.err == nil {
					r.resp.Body.Close()
				}
				if errors.Is(r.err, throttle.ErrThrottled) {
					fc.Advance(10 * ms)
					return true, 0
				}
				return false, o.HedgesRefused
			default:
			}
			if hits.Load() > n {
				// Attempt 1 and the hedge timer wait on the clock; once
				// the hedge is asked for, attempt 1 answers 5ms later
				// unless a hedge won.
				advance(t, fc, 2, 10*ms)
				for {
					select {
					case r := <-ch:
						if r.err == nil {
							r.resp.Body.Close()
						}
						return errors.Is(r.err, throttle.ErrThrottled), o.HedgesRefused
					case <-time.After(time.Millisecond):
					}
					wctx, wcancel := context.WithTimeout(ctx, time.Millisecond)
					if fc.BlockUntilContext(wctx, 1) == nil {
						fc.Advance(5 * ms)
					}
					wcancel()
				}
			}
			time.Sleep(50 * time.Microsecond) // a poll, not a timing assumption
		}
	}
	// The one overload signal: a 503 that says not to retry.
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil || r.resp.StatusCode != 503 {
		t.Fatalf("first operation: %v; want the 503", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(10 * ms)
	refused, hedgesRefused = 0, 0
	for k := range 600 { // 6s at one operation each 10ms
		r, h := op()
		if k >= 300 && r {
			refused++
		}
		if k >= 300 {
			hedgesRefused += h
		}
	}
	return refused, hedgesRefused
}

// TestHedgeLosersDoNotHideAnOutage: a server in a full outage. Every first
// attempt is answered "503, X-Should-Retry: false" (an overload signal,
// and final), but only after the hedge delay, and every hedge hangs, never
// answered. Each operation sends its first attempt and a hedge; the 503
// wins and the hanging hedge is canceled as a loser. A loser canceled for
// an answer that signalled overload counts as a request alone, never as an
// accept, so the throttle refuses at its cap during the outage: an accept
// is an attempt the server did not signal overload on.
func TestHedgeLosersDoNotHideAnOutage(t *testing.T) {
	realTime(t)
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
	th := drawing(&throttle.Throttle{}, func() float64 { return math.Float64frombits(draw.Load()) })
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
		t.Errorf("after 2 s in which the server answered 200 operations only with 503 (X-Should-Retry: false) and never answered their 200 hedges, a draw of 0.5 was admitted (err %v); want ErrThrottled (p at MaxReject 0.9): canceled hedge losers of a down server were counted as accepts (an accept is an attempt the server did not signal overload on)", r.err)
	}
}
