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

// TestAttack4ThrottleRecoversWithHedgingAfterOneOverloadSignal: a healthy
// destination whose first attempts are slow and whose hedges answer (a
// slow backend, and Hedging.Base reaching another pool): every
// operation sends two attempts, the hedge wins, the first is canceled.
// The server answers one 503 once, then 200 to everything for 6 seconds.
// docs/overload.md promises the throttle refuses attempts "while the
// host signals overload", "a healthy phase refuses nothing", 95% are
// admitted again about 1.1s after a server heals, and a destination
// turns cold "once five windows pass without a signal or a refusal".
// But each canceled loser counts as a request and not an accept, so at
// K = 1.5 (throttle.MinK, a documented setting) the single 503 makes the
// destination hot, the losers alone push p to a quarter, each refusal
// counts as a request and as a signal that keeps it hot, and the
// throttle settles refusing about a third of the operations and a third
// of the hedges to a server that has signalled nothing for seconds.
// Without the one 503 it refuses none of the same traffic (checked by
// hand: the same run with a 200 first refuses nothing).
func TestAttack4ThrottleRecoversWithHedgingAfterOneOverloadSignal(t *testing.T) {
	t.Parallel()
	if refused, hedges := hedgedRefusals(t, throttle.MinK, 1); refused+hedges > 15 {
		t.Errorf("K 1.5, one hedge per operation: 3s to 6s after the only overload signal, the server answering every attempt: %d of 300 operations refused with ErrThrottled, %d hedges refused; want at most 15 refusals in all (docs/overload.md: a healthy phase refuses nothing; 95%% admitted again about 1.1s after a server heals)", refused, hedges)
	}
}

// TestAttack4ThrottleRecoversWithTwoHedgesAfterOneOverloadSignal: as
// above with the zero Throttle (K 2) and two hedges per operation
// (MaxAttempts 3, the default): three attempts per accepted one. The
// operations go through, but the throttle keeps refusing about 60% of
// the hedges for good, each refusal keeping the destination hot.
func TestAttack4ThrottleRecoversWithTwoHedgesAfterOneOverloadSignal(t *testing.T) {
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
	th := &throttle.Throttle{K: k, Rand: func() float64 { // an even spread of draws
		return math.Mod(float64(i.Add(1))*0.6180339887, 1)
	}}
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
