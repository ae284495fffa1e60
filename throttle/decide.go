package throttle

import "time"

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
// a second over span. A server that accepts at least one request in K
// (K 2: half of them) is never refused. It reads no clock and no state.
//
// A Throttle's own counts span its window, reaching back over older
// buckets, accepts included, while the window holds fewer than 10
// requests, up to five windows: at a few requests a second the window
// holds one or two, and two failures in a row of an otherwise healthy
// destination are then weighed against the accepts before them, over
// three seconds, where MinRate asks for at least 3 requests.
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
