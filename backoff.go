package httpretry

import (
	"math/rand/v2"
	"time"
)

// FullJitter returns a duration drawn uniformly from [0, window), or 0 for a
// window that is not positive, from math/rand/v2's randomly seeded
// generator. It is the default [Transport.Jitter]: clients that failed
// together spread their retries over the whole window.
func FullJitter(window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	return rand.N(window)
}

// backoffWindow returns the window of retry r (r = 0 for the first retry):
// min(maxDelay, base·2^r), without overflow for any r.
// Both durations are positive. For integers, base·2^r <= maxDelay exactly
// when base <= maxDelay>>r, and that shift cannot overflow: it is 0 for
// r >= 63, which no positive base fits under.
func backoffWindow(base, maxDelay time.Duration, r int) time.Duration {
	if base <= maxDelay>>r {
		return base << r
	}
	return maxDelay
}
