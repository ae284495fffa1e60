package spread

import "time"

// health is one address's record of its recent answers, for passive
// ejection, as Envoy's outlier detection keeps it: consecutive failures,
// and consecutive ejections, which lengthen each ejection.
type health struct {
	fails     int       // failures since the last success or ejection
	ejections int       // ejections since the last success
	until     time.Time // ejected before this time
}

// ejected reports whether the address is ejected at now.
func (h health) ejected(now time.Time) bool { return now.Before(h.until) }

// ejectRule is the Transport's ejection settings, resolved.
type ejectRule struct {
	after int           // consecutive failures that eject; 0 never
	base  time.Duration // the first ejection's length
	max   time.Duration // the longest ejection
	share float64       // of a host's addresses that may be ejected at once
}

// maxEjected is how many of n addresses may be ejected at once: the
// share, rounded down, but at least one and never all of them, so that
// an outage of every address still has somewhere to send attempts.
func (r ejectRule) maxEjected(n int) int {
	m := max(int(float64(n)*r.share), 1)
	return min(m, n-1)
}

// failed returns h after a failure at now. ejected is how many of the
// host's n addresses are ejected at now. The failure that completes a run
// of r.after ejects the address for r.base times its number of
// consecutive ejections, up to r.max, unless the cap is reached: then it
// stays in, its run of failures counting on, to be ejected by a failure
// once another's ejection ended.
func (r ejectRule) failed(h health, now time.Time, ejected, n int) health {
	h.fails++
	if r.after <= 0 || h.fails < r.after || h.ejected(now) || ejected >= r.maxEjected(n) {
		return h
	}
	h.ejections++
	d := r.max
	if r.base > 0 && int64(h.ejections) <= int64(r.max/r.base) {
		d = r.base * time.Duration(h.ejections)
	}
	h.until, h.fails = now.Add(d), 0
	return h
}

// succeeded returns h after a success: restored, its counts cleared.
func (r ejectRule) succeeded(health) health { return health{} }
