package throttle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestThrottleRefusesNoOperationOfARareCallerWhileTheServerAcceptsMostAttempts:
// 3,000 operations of up to three attempts each, arriving at random
// (Poisson) at 0.2 and 1 a second, to a server that answers 10% or 30% of
// attempts at random with 503, with the default Throttle, a seeded random
// draw and a fake clock: none is refused. A server that accepts 70% of
// what it is sent is not overloaded; at such rates the counts hold a few
// requests, and two 503s against one accept would otherwise give p = 0.25.
func TestThrottleRefusesNoOperationOfARareCallerWhileTheServerAcceptsMostAttempts(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{0.2, 1} {
		for _, share503 := range []float64{0.1, 0.3} {
			t.Run(fmt.Sprintf("%v/s with %v%% 503s", rate, share503*100), func(t *testing.T) {
				t.Parallel()
				fc := clockwork.NewFakeClock()
				th := &Throttle{draws: rand.New(rand.NewPCG(5, 6)).Float64}
				d := th.dests.Get("k", 0, newDest)
				faults := rand.New(rand.NewPCG(7, 8))
				refused, failures, attempts := 0, 0, 0
				for range 3000 {
					r, _ := lowRateOp(th, d, fc, func(int) bool {
						attempts++
						f := faults.Float64() < share503
						if f {
							failures++
						}
						return f
					})
					refused += r
					fc.Advance(time.Duration(faults.ExpFloat64() / rate * float64(time.Second)))
				}
				if refused != 0 {
					t.Errorf("refused %d of 3000 operations (%d 503s of %d attempts); want 0", refused, failures, attempts)
				}
				if min, max := share503*0.8*float64(attempts), share503*1.2*float64(attempts); float64(failures) < min || float64(failures) > max {
					t.Fatalf("%d 503s drawn of %d attempts; the test needs about %v%%", failures, attempts, share503*100)
				}
			})
		}
	}
}

// TestThrottleMisreadChanceIsTheBinomialTailBelowOneAcceptInK: the chance
// that a server accepting each request with probability share shows
// fewer than n/k accepts in n requests, the counts on which the throttle
// refuses; and the fewest requests for which that chance is at most a
// bound: 10 for a server accepting 70% at K 2 (the default), none for one
// accepting exactly one in K.
func TestThrottleMisreadChanceIsTheBinomialTailBelowOneAcceptInK(t *testing.T) {
	t.Parallel()
	chances := []struct {
		n        int
		share, k float64
		want     float64
	}{
		{1, 0.7, 2, 0.3},                // 0 accepts
		{2, 0.7, 2, 0.09},               // 0 accepts: 1 of 2 is not fewer than half
		{3, 0.7, 2, 0.027 + 3*0.7*0.09}, // 0 or 1
		{10, 0.7, 2, 0.04734898},        // 0 to 4
		{10, 0.5, 2, 386.0 / 1024},      // 0 to 4: 1+10+45+120+210
		{4, 0.5, 1.5, 11.0 / 16},        // 0, 1 or 2 of 4: fewer than 4/1.5
		{3, 0.5, 3, 1.0 / 8},            // 0 of 3; 1 is not fewer than 3/3
		{5, 0, 2, 1},                    // a server accepting nothing
		{5, 1, 2, 0},                    // a server accepting everything
		{5, -0.5, 2, 1},
	}
	for _, tt := range chances {
		if got := misreadChance(tt.n, tt.share, tt.k); !(math.Abs(got-tt.want) <= 1e-8) {
			t.Errorf("misreadChance(%d, %v, %v) = %v; want %v", tt.n, tt.share, tt.k, got, tt.want)
		}
	}
	samples := []struct {
		share, k, chance float64
		most, want       int
	}{
		{healthyAccepts, DefaultK, healthyMisread, maxSamples, 10}, // 8: 5.8%, 9: 9.9%, 10: 4.7%
		{healthyAccepts, DefaultK, healthyMisread, 10, 10},         // the last one looked at
		{healthyAccepts, DefaultK, healthyMisread, 9, 0},
		{0.9, 2, 0.05, maxSamples, 2},                     // 1: 10%, 2: 1%
		{0.7, 2, misreadChance(1, 0.7, 2), maxSamples, 1}, // at most: 30% at 1
		{0.7, 2, misreadChance(1, 0.7, 2) - 1e-9, 100, 2}, // 9% at 2
		{0.7, 2, 0.01, maxSamples, 26},
		{0.5, 2, 0.05, maxSamples, 0},    // about a half whatever n
		{0.6, minK, 0.05, maxSamples, 0}, // below one accept in 1.5
	}
	for _, tt := range samples {
		if got := samplesFor(tt.share, tt.k, tt.chance, tt.most); got != tt.want {
			t.Errorf("samplesFor(%v, %v, %v, %d) = %d; want %d", tt.share, tt.k, tt.chance, tt.most, got, tt.want)
		}
	}
	if throttleSamples != 10 {
		t.Errorf("throttleSamples = %v; want 10", throttleSamples)
	}
}

// TestRefuseProbabilityIsZeroWithoutRequests: RefuseProbability, given
// counts from elsewhere, refuses nothing when they hold no request,
// whatever they say of accepts and with no minimum number of requests
// (MinRate -1); 10 requests none of them accepted give the SRE form's
// 10/11, capped at 0.9.
func TestRefuseProbabilityIsZeroWithoutRequests(t *testing.T) {
	t.Parallel()
	th := &Throttle{MinRate: -1}
	for _, tt := range []struct{ requests, accepts, want float64 }{
		{0, 0, 0},
		{0, -1, 0},
		{-1, 0, 0},
		{-0.5, -3, 0},
		{10, 0, 0.9},
	} {
		if got := th.RefuseProbability(tt.requests, tt.accepts, time.Second); got != tt.want {
			t.Errorf("RefuseProbability(%v, %v) = %v; want %v", tt.requests, tt.accepts, got, tt.want)
		}
	}
}
