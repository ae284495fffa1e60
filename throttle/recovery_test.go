package throttle

import (
	"fmt"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// recoveryAfter drives th at 1000 operations a second (fake clock): 2s
// healthy, a 2s outage, 10s healthy. It returns the admitted fraction in
// the outage's second half and the first 100ms step after healing from
// which every later 100ms admits at least 95%, or -1.
func recoveryAfter(th *Throttle) (outage float64, recovered time.Duration) {
	fc := clockwork.NewFakeClock()
	healthy := func(t time.Duration) bool { return t < 2*time.Second || t >= 4*time.Second }
	admitted := throttleSim(th, fc, 1000, 14*time.Second, healthy)
	for _, a := range admitted[30:40] {
		outage += a
	}
	outage /= 10
	recovered = -1
	for j := len(admitted) - 1; j >= 40; j-- {
		if admitted[j] < 0.95 {
			break
		}
		recovered = time.Duration(j-40) * 100 * time.Millisecond
	}
	return outage, recovered
}

// TestThrottleNonFiniteFieldsKeepTheCapAndRecover: a K or MaxReject that
// is NaN or infinite is never a throttle that refuses everything forever:
// at least 1 − MaxReject (the default 10%) still reaches a failing
// server, and 95% are admitted again within 2s of it healing.
func TestThrottleNonFiniteFieldsKeepTheCapAndRecover(t *testing.T) {
	t.Parallel()
	for _, th := range []*Throttle{
		{K: math.NaN()},
		{K: math.Inf(1)},
		{MaxReject: math.NaN()},
	} {
		t.Run(fmt.Sprintf("K %v MaxReject %v", th.K, th.MaxReject), func(t *testing.T) {
			t.Parallel()
			th.draws = evenDraws()
			outage, recovered := recoveryAfter(th)
			if outage < 0.05 {
				t.Errorf("during the outage %.3f of operations were admitted; want about 0.1 (the cap), never 0", outage)
			}
			if recovered < 0 || recovered > 2*time.Second {
				t.Errorf("after healing: recovered %v (-1: never in 10s); want ≥ 95%% admitted within 2s", recovered)
			}
		})
	}
}

// TestThrottleSmallKRecoversAfterHealing: with K at or below about 1
// (0.5, 0.9, 1, and failsafe-go's 1.11), a destination that accepts
// every attempt after an outage is admitted in full again: the admitted
// share grows by a factor of e every Window/K, so from the cap's 10% to
// 95% takes under 3s with the default Window; 5s is allowed here.
func TestThrottleSmallKRecoversAfterHealing(t *testing.T) {
	t.Parallel()
	for _, k := range []float64{0.5, 0.9, 1, 1.11} {
		th := &Throttle{K: k, draws: evenDraws()}
		_, recovered := recoveryAfter(th)
		if recovered < 0 || recovered > 5*time.Second {
			s := th.dests.Get("k", 0, newDest)
			s.mu.Lock()
			req, acc, _ := s.w.counts()
			s.mu.Unlock()
			t.Errorf("K %v: after healing, recovered %v (-1: never in 10s; window %.0f requests, %.0f accepts, every attempt accepted); want ≥ 95%% admitted within 5s", k, recovered, req, acc)
		}
	}
}

// TestThrottleTinyWindowDoesNotPanic: a Window shorter than its ten
// buckets (under 10ns) is a valid Duration and never panics an operation.
func TestThrottleTinyWindowDoesNotPanic(t *testing.T) {
	t.Parallel()
	for _, w := range []time.Duration{1, 5, 9} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Window %v: panic %v; want the throttle to decide", w, p)
				}
			}()
			fc := clockwork.NewFakeClock()
			th := &Throttle{Window: w}
			s := th.dests.Get("k", 0, newDest)
			throttleAt(th, s, fc, 3, false)
			fc.Advance(time.Millisecond)
			th.admit(s, fc)
			throttleAt(th, s, fc, 1, true)
		}()
	}
}

// TestThrottleKeepsADestinationInUseWhenOthersCycle: with MaxKeys 8 and
// 16 other destinations called in turn, a failing destination called
// between each of them stays known: it is refused at about the cap
// (10% admitted), not forgotten and admitted afresh. Each of 20 Throttles
// is tried, since which key a full table gives up may depend on the run.
func TestThrottleKeepsADestinationInUseWhenOthersCycle(t *testing.T) {
	t.Parallel()
	forgotten := 0
	worst := 0
	for range 20 {
		fc := clockwork.NewFakeClock()
		th := &Throttle{MaxKeys: 8, draws: evenDraws()}
		down := httptest.NewRequest("GET", "http://down.test/", nil)
		admitted := 0
		for i := range 2000 {
			th.Dest(httptest.NewRequest("GET", fmt.Sprintf("http://h%d.test/", i%16), nil))
			s := th.Dest(down)
			if _, err := th.admit(s, fc); err == nil {
				admitted++
				throttleAt(th, s, fc, 1, false)
			}
		}
		if admitted > 400 {
			forgotten++
			worst = max(worst, admitted)
		}
	}
	if forgotten > 0 {
		t.Errorf("in %d of 20 runs the failing destination was admitted more than 400 of 2000 times (worst %d); want about 200 (the 10%% cap): it is forgotten while in use", forgotten, worst)
	}
}
