package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// hedgeRun is one policy's pass through one hedging scenario: the
// caller's latency of every operation and the server's counts.
type hedgeRun struct {
	scenario string
	policy   hedgePolicy
	ops      int             // operations started
	failed   int             // of which ended in an error or a status other than 200
	lat      []time.Duration // of every operation, failed ones included
	hits     int64           // requests the server received: attempts and hedges
	canceled int64           // of which the server saw canceled before it answered
	conns    int64           // connections the server accepted
	refused  int64           // hedges httpretry's Outcomes report refused; -1 for a peer
	// delays samples the adaptive hedge delay every delayEvery, from the
	// start of the run; nil for a policy without one.
	delays []time.Duration
}

// delayEvery is how often a run samples its policy's adaptive delay.
const delayEvery = 100 * time.Millisecond

// tail summarises a set of latencies at the quantiles hedging is about.
type tail struct {
	n                int
	p50, p99, p999   time.Duration
	max              time.Duration
	extra            float64 // server requests beyond one per operation, in % of operations
	canceled, conns  int64
	refused          int64 // -1: not known (a peer)
	failed           int
	hits             int64
	policyKey, label string
}

// rank returns the nearest-rank q-quantile of sorted d (0 when empty).
func rank(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// summary returns the run's tail. It sorts a copy of the latencies.
func (r *hedgeRun) summary() tail {
	d := slices.Clone(r.lat)
	slices.Sort(d)
	t := tail{
		n: len(d), p50: rank(d, 0.50), p99: rank(d, 0.99), p999: rank(d, 0.999),
		canceled: r.canceled, conns: r.conns, refused: r.refused, failed: r.failed, hits: r.hits,
		policyKey: r.policy.key, label: r.policy.name,
	}
	if len(d) > 0 {
		t.max = d[len(d)-1]
	}
	if r.ops > 0 {
		t.extra = 100 * float64(r.hits-int64(r.ops)) / float64(r.ops)
	}
	return t
}

// bestFixed returns the index of the fixed-delay run with the lowest
// p99.9 among those whose extra load is at most maxExtra percent, or -1
// if none is. A fixed delay short enough to hedge half the requests
// always wins on the tail alone; the comparison is at the same price.
func bestFixed(fixed []tail, maxExtra float64) int {
	best := -1
	for i, f := range fixed {
		if f.extra > maxExtra {
			continue
		}
		if best < 0 || f.p999 < fixed[best].p999 {
			best = i
		}
	}
	return best
}

// convergence returns how long after shift the sampled delay (one sample
// every step from 0) settled: the time of the first sample from which
// every later one stays within tol (a fraction) of the settled value, the
// median of the last settleSamples samples. ok is false when there are not
// enough samples after the shift, or when the delay never settled.
func convergence(delays []time.Duration, step, shift time.Duration, tol float64, settleSamples int) (after, settled time.Duration, ok bool) {
	from := int((shift + step - 1) / step)
	if step <= 0 || settleSamples <= 0 || len(delays)-from < settleSamples {
		return 0, 0, false
	}
	last := slices.Clone(delays[len(delays)-settleSamples:])
	slices.Sort(last)
	settled = last[len(last)/2]
	if settled <= 0 {
		return 0, 0, false
	}
	within := func(d time.Duration) bool {
		return math.Abs(float64(d-settled)) <= tol*float64(settled)
	}
	first := len(delays)
	for i := len(delays) - 1; i >= from && within(delays[i]); i-- {
		first = i
	}
	if first == len(delays) {
		return 0, settled, false
	}
	return time.Duration(first)*step - shift, settled, true
}

// independentLine is the first target's line: the tail a single attempt
// and the adaptive delay leave, and the load the adaptive delay added.
func independentLine(single, adaptive tail, peers []tail) string {
	factor := 0.0
	if adaptive.p999 > 0 {
		factor = float64(single.p999) / float64(adaptive.p999)
	}
	p50 := pctChange(adaptive.p50, single.p50)
	if math.Abs(p50) < 0.5 {
		p50 = 0 // printed as +0%, never -0%
	}
	met := factor >= 50 && adaptive.extra <= 2 && math.Abs(p50) <= 5
	bestPeer := ""
	for _, p := range peers {
		// A peer at most as loaded with a tail at least as short beats us.
		if p.p999 <= adaptive.p999 && p.extra <= adaptive.extra {
			met = false
		}
	}
	if len(peers) > 0 {
		b := bestOf(peers)
		bestPeer = fmt.Sprintf(", best peer %s p99.9 %s ms at extra %.1f%%", b.label, msCell(b.p999), b.extra)
	}
	return fmt.Sprintf("hedging: independent p99.9 single %s ms, adaptive %s ms (%.0fx), extra %.1f%%, p50 %+.0f%%%s; %s",
		msCell(single.p999), msCell(adaptive.p999), factor, adaptive.extra, p50, bestPeer, verdict(met))
}

// bestOf returns the tail with the lowest p99.9 (ties: the lower extra load).
func bestOf(ts []tail) tail {
	var b tail
	for i, t := range ts {
		if i == 0 || t.p999 < b.p999 || (t.p999 == b.p999 && t.extra < b.extra) {
			b = t
		}
	}
	return b
}

// correlatedLine is the second target's line: the requests the adaptive
// delay sent against a single attempt's, and their p99s.
func correlatedLine(single, adaptive tail) string {
	load := 0.0
	if single.hits > 0 {
		load = float64(adaptive.hits) / float64(single.hits)
	}
	met := load <= 1.10 && !worse(adaptive.p99, single.p99)
	return fmt.Sprintf("hedging: correlated load %.2fx, p99 %s ms (no hedging %s ms); %s",
		load, msCell(adaptive.p99), msCell(single.p99), verdict(met))
}

// worse reports whether p99 a is longer than b by more than the
// resolution of the server's and the client's timers on a loopback run:
// 1 ms, or 1% of b when that is more. Below that, two runs of one policy
// differ as much.
func worse(a, b time.Duration) bool {
	return a-b > max(time.Millisecond, b/100)
}

// zeroConfigLine is the third target's line: the adaptive p99.9 against
// the best fixed delay of the sweep, and how long the adaptive delay took
// to follow the shift (reconverged false: it did not settle).
func zeroConfigLine(adaptive, best tail, bestDelay time.Duration, reconv, settled time.Duration, reconverged bool) string {
	within := pctChange(adaptive.p999, best.p999)
	conv := "did not settle"
	if reconverged {
		conv = fmt.Sprintf("%.1f s", reconv.Seconds())
	}
	met := within <= 10 && reconverged && reconv <= 10*time.Second
	return fmt.Sprintf("hedging: zero-config within %.0f%% of best fixed (adaptive p99.9 %s ms, fixed %s %s ms at extra %.1f%%), re-converged %s after 5 ms -> 50 ms (delay %s ms); %s",
		math.Max(within, 0), msCell(adaptive.p999), fmtDelay(bestDelay), msCell(best.p999), best.extra, conv, msCell(settled), verdict(met))
}

// pctChange returns how much larger a is than b, in percent of b.
func pctChange(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return 100 * float64(a-b) / float64(b)
}

func verdict(met bool) string {
	if met {
		return "target met"
	}
	return "target NOT met"
}

// msCell formats d in milliseconds: one decimal below 10 ms, whole above.
func msCell(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

func fmtDelay(d time.Duration) string { return msCell(d) + " ms" }
