package redisretry

import (
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// This file holds the rule by which a flush chooses to send its counts:
// an accept is sent more often than a failure while the fleet's accepts
// are rare, as right after a heal, so that the fleet learns of the heal
// from its first accepts rather than from one in 1/Share of them.

// maxAcceptWeight is the most an accept weighs against a failure in the
// chance of a send. It bounds what a stale view of the fleet can cost: a
// process that has not yet heard that the fleet's accepts are common
// again sends each accept with at most this many times Share.
const maxAcceptWeight = 8

// acceptWeight returns how many failures an accept weighs as in the
// chance of a send, given the fleet's requests and accepts over the last
// window (the throttle's default, 600ms): its failures per accept, so that the sends
// carry about as many accepts as failures, within [1, maxAcceptWeight].
// A window with requests and no accept (an outage, or its heal not yet
// heard) weighs maxAcceptWeight; one with no requests (nothing heard)
// weighs 1, as does one where accepts are at least as common as failures:
// an accept is never sent less often than a failure, since the throttle
// refuses on too few of them. Counts that make no ratio (infinite ones) weigh 1.
func acceptWeight(requests, accepts float64) float64 {
	if !(requests > 0) {
		return 1
	}
	if !(accepts > 0) {
		return maxAcceptWeight
	}
	w := (requests - accepts) / accepts
	if !(w > 1) {
		return 1 // NaN included: min and max would pass it on
	}
	return min(w, maxAcceptWeight)
}

// sendChance returns the probability with which a flush sends pending
// counts of req requests, acc of them accepted, each accept weighing
// weight failures: Share times the weighed counts, at most 1. Whatever
// the chance, a send is scaled up by its inverse (see fleetDest.take),
// so the fleet's counts are right on average; the weight only spends the
// sends where the counts are scarce. Over the fleet, when the weight
// follows its counts (acceptWeight), a count costs at most 2·share
// commands on average: share·(1 + (w−1)·a) with w = (1−a)/a for a share
// a of accepts.
func sendChance(req, acc, share, weight float64) float64 {
	acc = min(max(acc, 0), req)
	return min(1, share*(req+(weight-1)*acc))
}

// acceptWeight returns the weight of an accept in d's sends at now
// (see acceptWeight): from the last publication's buckets that began
// within the throttle's default window before now, or, when the buckets
// (of width w) are wider than that window, within one bucket before now,
// when the publication is not older than stale; 1 without one.
func (d *fleetDest) acceptWeight(now time.Time, w, stale time.Duration) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := &d.pub
	if p.at.IsZero() || now.Sub(p.at) > stale {
		return 1
	}
	var req, acc float64
	for i := range p.req {
		age := now.UnixNano() - (p.head-int64(i))*int64(w)
		if age >= -int64(w) && age < int64(max(throttle.DefaultWindow, w)) {
			req += p.req[i]
			acc += p.acc[i]
		}
	}
	return acceptWeight(req, acc)
}
