package throttle

import "time"

// This file holds the seam through which a fleet of processes shares its
// counts: the Throttle hands its counts to a Shared and decides on its
// own counts plus the other processes'.

// Shared is the counts a fleet of processes shares for its destinations,
// so that a thousand processes that each send one request a second decide
// as one process sending a thousand: a process that sends few requests
// learns of an outage, and of the heal, from the fleet's attempts and not
// only from its own. contrib/redisretry's ThrottleState keeps them in
// Redis.
//
// The throttle calls its methods on the path of its decisions: none may
// block or wait for the network. The refusal rule is the same with or
// without a Shared (see [Throttle]); only the counts it reads grow. A
// Shared that knows nothing of a destination (its store is away) adds
// nothing, and the process decides on its own counts. Implementations
// must be safe for simultaneous use by multiple goroutines.
type Shared interface {
	// Add receives counts the throttle made for the destination key at
	// now: requests sent or refused, and accepts among them. It is
	// called once for each count the throttle adds to its window while
	// the destination is hot (see [Dest]), and once for the accepts
	// counted while it was cold, when they are folded in; never while
	// the destination is cold here and in the fleet.
	Add(key string, now time.Time, requests, accepts float64)

	// Hot reports whether the other processes' recent counts for key
	// hold an overload signal: a destination that is cold here is then
	// decided on the fleet's counts. It is called on every decision and
	// every result of a destination that is cold here, so it must be
	// cheap: an atomic load, not a computation over the counts.
	Hot(key string) bool

	// Counts adds the other processes' counts for key, as of now, into
	// requests and accepts, by the bucket of width they fall in: index 0
	// the bucket that holds now, index i the bucket i widths before. The
	// slices are as long as the ring the throttle keeps. It is called
	// once per decision of a hot destination.
	Counts(key string, now time.Time, width time.Duration, requests, accepts []float64)
}

// fleetLink is what a Dest shared with a fleet knows of it.
type fleetLink struct {
	key    string
	shared Shared
}

// shareKey returns the key d's counts are shared under, "" when they are
// not shared.
func (th *Throttle) shareKey(d *Dest) string {
	if f := d.fleet.Load(); f != nil && th.Shared != nil {
		return f.key
	}
	return ""
}

// link remembers, once, the key and the Shared d's counts go to.
func (d *Dest) link(key string, s Shared) {
	if d.fleet.Load() == nil {
		d.fleet.CompareAndSwap(nil, &fleetLink{key: key, shared: s})
		d.linked.Store(true)
	}
}

// fleetHot reports whether d is shared and hot in the fleet.
func (d *Dest) fleetHot() bool {
	return d.linked.Load() && d.counts.linkHot()
}

// linkHot reports whether the fleet holds the key of c's link hot, apart
// so that fleetHot inlines: most destinations are not shared. c must be
// linked.
//
//go:noinline
func (c *counts) linkHot() bool {
	f := c.fleet.Load()
	return f.shared.Hot(f.key)
}

// hotFor reports whether d is hot here or in the fleet: its decisions
// then read the clock and the counts, and its results are counted in its
// window (and shared).
func (th *Throttle) hotFor(d *Dest) bool {
	return d.hot.Load() || d.fleetHot()
}

// share hands counts of d made at now to the Shared, if any: none when
// no request is counted (accepts come with their requests).
func (th *Throttle) share(d *Dest, now time.Time, requests, accepts float64) {
	if k := th.shareKey(d); k != "" && requests != 0 {
		d.fleet.Load().shared.Add(k, now, requests, accepts)
	}
}

// decisionCounts returns the counts a decision on d at now reads, and
// how many buckets they cover: d's window alone, or, with a Shared, d's
// window plus the fleet's counts bucket by bucket, read by the same
// rule (countBack). d.mu must be held.
func (th *Throttle) decisionCounts(d *Dest, now time.Time) (req, acc float64, n int) {
	k := th.shareKey(d)
	if k == "" {
		return d.w.counts()
	}
	var fr, fa [throttleRing]float64
	d.fleet.Load().shared.Counts(k, now, th.window()/throttleBuckets, fr[:], fa[:])
	// Bucket i widths back sits at head−i in both rings: the combined
	// ring's head is 0.
	var ring [throttleRing]bucket
	for i := range throttleRing {
		b := d.w.b[(d.w.head-i+throttleRing)%throttleRing]
		ring[(throttleRing-i)%throttleRing] = bucket{req: b.req + max(fr[i], 0), acc: b.acc + max(fa[i], 0)}
	}
	return countBack(&ring, 0)
}
