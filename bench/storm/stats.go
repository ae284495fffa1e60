package main

import (
	"math"
	"slices"
	"time"
)

// run is everything one policy's pass through one scenario produced: the
// client's view of every operation and the server's counts.
type run struct {
	scenario  string
	policy    policy
	processes int // simulated client processes sharing the load
	phases    []phase
	deadline  time.Duration
	ops       []opResult

	hits        int64   // every request the server saw
	hitsByPhase []int64 // by the phase the operation arrived in; the last slot is untagged
	hitsAt      []int64 // by 100ms bucket
	connsAt     []int64 // new connections by 100ms bucket
	conns       int64
	shed, down  int64 // 503s for lack of capacity, and of the outage
	wall        time.Duration

	start   time.Time   // when the server started, the origin of the phases
	redis   *redisStats // the budget's measurements, for the Redis fleet policy
	redisOn string      // where the budget was kept: "" one server, "cluster" a Redis Cluster
}

// label names the run in tables and charts.
func (r *run) label() string {
	switch {
	case r.scenario == "fleet" && r.policy.key == redisPolicyKey:
		return plural(r.processes, "process", "processes") + ", one budget in Redis"
	case r.scenario == "fleet":
		return plural(r.processes, "process", "processes") + ", a budget each"
	case r.processes > 1:
		return plural(r.processes, "process", "processes")
	}
	return r.policy.name
}

// quantiles summarises a set of latencies.
type quantiles struct {
	n             int
	p50, p99, max time.Duration
}

// summarise returns the nearest-rank p50 and p99 and the maximum of d,
// sorting d in place.
func summarise(d []time.Duration) quantiles {
	if len(d) == 0 {
		return quantiles{}
	}
	slices.Sort(d)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(d)))) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return quantiles{n: len(d), p50: rank(0.50), p99: rank(0.99), max: d[len(d)-1]}
}

// stats are one phase of one run.
type stats struct {
	phase   phase
	ops     int     // operations that arrived in the phase
	ok      int     // of which succeeded within the deadline
	failed  int     // of which did not: a final 503, or an error
	errs    int     // of the failed, those that ended in an error rather than a response
	goodput float64 // ok per second of the phase
	hits    int64   // server hits charged to the phase's operations
	amp     float64 // hits / ops
	conns   int64   // connections the server accepted during the phase
	lat     quantiles
	failLat quantiles // of the failed operations alone
}

// phaseStats returns the stats of every phase. Operations, successes and
// hits belong to the phase the operation arrived in, even when a retry or
// the response came later; connections to the phase in which they opened
// (the last phase also takes those of the drain).
func (r *run) phaseStats() []stats {
	out := make([]stats, len(r.phases))
	lats := make([][]time.Duration, len(r.phases))
	fails := make([][]time.Duration, len(r.phases))
	for _, o := range r.ops {
		s := &out[o.phase]
		s.ops++
		lats[o.phase] = append(lats[o.phase], o.latency)
		if o.ok {
			s.ok++
			continue
		}
		s.failed++
		if o.err {
			s.errs++
		}
		fails[o.phase] = append(fails[o.phase], o.latency)
	}
	var from time.Duration
	for i := range out {
		s := &out[i]
		p := r.phases[i]
		s.phase = p
		s.goodput = float64(s.ok) / p.dur.Seconds()
		s.hits = r.hitsByPhase[i]
		if s.ops > 0 {
			s.amp = float64(s.hits) / float64(s.ops)
		}
		to := from + p.dur
		if i == len(out)-1 {
			to = time.Duration(len(r.connsAt)) * bucket
		}
		s.conns = sumBuckets(r.connsAt, from, to)
		s.lat = summarise(lats[i])
		s.failLat = summarise(fails[i])
		from += p.dur
	}
	return out
}

// sumBuckets adds the buckets that start in [from, to).
func sumBuckets(c []int64, from, to time.Duration) int64 {
	var n int64
	for i, v := range c {
		if at := time.Duration(i) * bucket; at >= from && at < to {
			n += v
		}
	}
	return n
}

// successesAt returns the operations that succeeded, by the 100ms bucket
// in which they ended.
func (r *run) successesAt() []int64 {
	out := make([]int64, len(r.hitsAt))
	for _, o := range r.ops {
		if o.ok {
			out[min(int(o.end()/bucket), len(out)-1)]++
		}
	}
	return out
}

// failuresAt returns the operations that failed, by the 100ms bucket in
// which they ended.
func (r *run) failuresAt() []int64 {
	out := make([]int64, len(r.hitsAt))
	for _, o := range r.ops {
		if !o.ok {
			out[min(int(o.end()/bucket), len(out)-1)]++
		}
	}
	return out
}

// arrivalsAt returns the operations that started, by 100ms bucket.
func (r *run) arrivalsAt() []int64 {
	out := make([]int64, len(r.hitsAt))
	for _, o := range r.ops {
		out[min(int(o.start/bucket), len(out)-1)]++
	}
	return out
}

// recoveryWindow is how many 100ms buckets the recovery test adds up. A
// bucket holds about 20 operations at 200 per second, and a success lands
// in the bucket after its arrival's when it arrived in the last S of one:
// half a second is steady enough to tell recovery from that.
const recoveryWindow = 5

// recovery returns how long after the end of the fault phase (phase 1)
// goodput was back to 90% of healthy, and false if it never was within the
// last phase.
//
// Arrivals are Poisson: at 200 per second half a second holds 100 ± 10
// of them, so comparing goodput with the healthy phase's mean rate would
// call a quiet half-second unrecovered. Healthy goodput for a window is
// instead what the healthy phase's success ratio makes of the operations
// that arrived in that window; each policy sees the same arrivals.
func (r *run) recovery() (time.Duration, bool) {
	if len(r.phases) < 3 {
		return 0, false
	}
	st := r.phaseStats()[0]
	if st.ops == 0 {
		return 0, false
	}
	end := r.phases[0].dur + r.phases[1].dur
	// Only the recovery phase counts: after it, arrivals stop.
	n := int((end + r.phases[2].dur) / bucket)
	good, arrived := r.successesAt(), r.arrivalsAt()
	good, arrived = good[:min(len(good), n)], arrived[:min(len(arrived), n)]
	return recoveryTime(good, arrived, end, float64(st.ok)/float64(st.ops), 0.9, recoveryWindow)
}

// recoveryTime returns the time from end until the start of the first
// window of n buckets, starting at a bucket boundary at or after end, in
// which the successes reach frac·ratio of the arrivals; false if no
// complete window does.
func recoveryTime(good, arrived []int64, end time.Duration, ratio, frac float64, n int) (time.Duration, bool) {
	first := int((end + bucket - 1) / bucket)
	for i := first; i+n <= min(len(good), len(arrived)); i++ {
		var g, a int64
		for j := i; j < i+n; j++ {
			g += good[j]
			a += arrived[j]
		}
		if float64(g) >= frac*ratio*float64(a) {
			return time.Duration(i)*bucket - end, true
		}
	}
	return 0, false
}
