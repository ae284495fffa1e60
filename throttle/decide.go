package throttle

import (
	"math"
	"time"
)

// This file holds the throttle's rule: given what a destination's
// counts hold, the probability of refusing an attempt. It is a pure
// function of the counts, so that counts gathered elsewhere (a fleet's,
// shared) are decided by the same rule.

// RefuseProbability returns the probability with which th refuses an
// attempt to a destination whose counts, over span, hold requests
// attempts sent or refused and accepts of them the server accepted:
//
//	p = min(MaxReject, max(0, (requests − K·accepts) / (requests + 1)))
//
// and 0 while the counts are too few to say anything: fewer than MinRate
// a second over span, or fewer than 10 (see samplesFor). A server that
// accepts at least one request in K (K 2: half of them) is never refused
// on its counts. It reads no clock and no state.
//
// A Throttle's own counts span its window, reaching back over older
// buckets, accepts included, while the window holds fewer than 10
// requests, up to five windows: at a few requests a second the window
// holds one or two, and two failures in a row of an otherwise healthy
// destination are then weighed against the accepts before them, over
// three seconds, where at least 10 requests are needed.
func (th *Throttle) RefuseProbability(requests, accepts float64, span time.Duration) float64 {
	return rejectProbability(requests, accepts, th.k(), th.maxReject(), th.minRequests(span))
}

// rejectProbability is RefuseProbability with the fields resolved: the
// SRE form (requests − k·accepts)/(requests + 1), clamped into
// [0, maxReject], and 0 below minRequests.
func rejectProbability(requests, accepts, k, maxReject, minRequests float64) float64 {
	if requests < minRequests || requests <= 0 {
		return 0
	}
	p := (requests - k*accepts) / (requests + 1)
	return min(max(p, 0), maxReject)
}

// The fewest requests the throttle refuses on is decided by a rule: few
// counts of a healthy server must seldom look like an overloaded one's.
const (
	// healthyAccepts is the share of attempts a server still taken as
	// healthy accepts: one that answers 30% of them with 503.
	healthyAccepts = 0.7
	// healthyMisread is the largest chance allowed that such a server's
	// counts show fewer than requests/K accepts, the counts on which the
	// throttle refuses.
	healthyMisread = 0.05
	// maxSamples bounds the search for the throttle's own number.
	maxSamples = 1000
)

// misreadChance returns the chance that a server accepting each of n
// requests with probability share shows fewer than n/k accepts in them:
// the binomial tail P(accepts < n/k), the chance that its counts give a
// refusal probability above 0. share is at most 1; one of 0 or less is
// misread every time. k is at least 1.
func misreadChance(n int, share, k float64) float64 {
	if share <= 0 {
		return 1
	}
	// Each term in logarithms, so that none underflows at large n.
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	chance := 0.0
	for a := range n {
		if float64(a)*k >= float64(n) {
			break
		}
		chance += math.Exp(lg(n) - lg(a) - lg(n-a) + float64(a)*math.Log(share) + float64(n-a)*math.Log1p(-share))
	}
	return min(chance, 1)
}

// samplesFor returns the fewest requests n, up to most, for which
// misreadChance(n, share, k) is at most chance, or 0 when none is. A
// server accepting exactly 1/k of its requests is misread about half the
// time whatever n, so the rule is held for a share above it: 10 requests
// for 70% accepted and K 2 (4.7%; 2 for 90% accepted).
func samplesFor(share, k, chance float64, most int) int {
	for n := 1; n <= most; n++ {
		if misreadChance(n, share, k) <= chance {
			return n
		}
	}
	return 0
}
