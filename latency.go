package httpretry

import (
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the latency estimator behind the adaptive hedge delay and
// the learned attempt limit: per key, the most recent attempt latencies, a
// Kaplan–Meier quantile over them that counts a canceled attempt as "at
// least this long", and the extra-load cap on hedges.

// latencyWindow is how many recent latencies a key keeps: 2048 samples of
// 8 bytes, plus a sorting buffer of the same size, 32 KiB per key. At 200
// requests a second it spans about ten seconds of traffic, so a shift in
// the distribution is followed within that.
const latencyWindow = 2048

// latencySet holds the distributions of a Transport's keys, at most max of
// them; requests of further keys share other.
type latencySet struct {
	mu    sync.RWMutex // protects keys
	keys  map[string]*latencyDist
	other *latencyDist
	max   int

	hedgeQ float64         // the quantile the hedge delay is, 0 without Hedging
	learn  *LearnedTimeout // nil without LearnAttemptTimeout
}

// latencies returns t's latency set, created on first use, or nil when t
// records no latencies.
func (t *Transport) latencies() *latencySet {
	if !t.learns() {
		return nil
	}
	if s := t.latencySet.Load(); s != nil {
		return s
	}
	s := &latencySet{keys: make(map[string]*latencyDist), other: newLatencyDist(), max: t.Hedging.maxKeys(), learn: t.LearnAttemptTimeout}
	if t.Hedging != nil {
		s.hedgeQ = 1 - t.Hedging.maxExtraLoad()
	}
	t.latencySet.CompareAndSwap(nil, s)
	return t.latencySet.Load()
}

// find returns key's distribution without adding one: the shared one for
// a key past the bound that has been seen, nil for a key never seen.
func (s *latencySet) find(key string) *latencyDist {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.keys[key]; d != nil {
		return d
	}
	if len(s.keys) >= s.max && s.other.held.Load() > 0 {
		return s.other
	}
	return nil
}

// lookup returns key's distribution, adding it while there is room.
func (s *latencySet) lookup(key string) *latencyDist {
	s.mu.RLock()
	d := s.keys[key]
	s.mu.RUnlock()
	if d != nil {
		return d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d = s.keys[key]; d != nil {
		return d
	}
	if len(s.keys) >= s.max {
		return s.other
	}
	d = newLatencyDist()
	s.keys[strings.Clone(key)] = d // the key may be part of a request's URL
	return d
}

// latencyDist is one key's recent latencies and what is derived from them.
// Recording takes its lock; reading the derived delay and limit does not.
type latencyDist struct {
	mu        sync.Mutex // protects ring, n, next and fresh
	computing sync.Mutex // protects sorted; held while the quantiles are computed
	ring      [latencyWindow]uint64
	sorted    [latencyWindow]uint64
	n         int // samples held, at most latencyWindow
	next      int // where the next sample goes in ring
	fresh     int // samples recorded since the quantiles were last computed

	held    atomic.Int64 // n, for readers without the lock
	hedgeAt atomic.Int64 // the hedge quantile, in nanoseconds
	limitAt atomic.Int64 // the learned attempt limit, in nanoseconds; 0 for none
	extra   atomic.Int64 // extra-load tokens, in tokenUnit; starts full
}

func newLatencyDist() *latencyDist {
	d := &latencyDist{}
	d.extra.Store(hedgeBurst * tokenUnit)
	return d
}

// sample encodes a latency for sorting: the duration in the high bits, and
// the lowest bit set when the latency is censored (the attempt was ended
// before it answered, so its latency is at least this). Sorted ascending,
// an answer comes before a censored sample of the same duration, as the
// Kaplan–Meier estimate needs.
func sample(d time.Duration, censored bool) uint64 {
	s := uint64(max(d, 0)) << 1
	if censored {
		s |= 1
	}
	return s
}

// record adds a latency and, every so often, recomputes the quantiles:
// after every sample while few are held, then after every n/16 (128 once
// the window is full), so that the cost of sorting, about 50µs for a full
// window, is spread over the samples. The sort runs outside the lock
// that recording takes, and is skipped when another is under way.
func (d *latencyDist) record(s *latencySet, lat time.Duration, censored bool) {
	d.mu.Lock()
	d.ring[d.next] = sample(lat, censored)
	d.next = (d.next + 1) % latencyWindow
	d.n = min(d.n+1, latencyWindow)
	d.held.Store(int64(d.n))
	d.fresh++
	due := d.fresh >= max(1, d.n/16)
	if !due || !d.computing.TryLock() {
		d.mu.Unlock()
		return
	}
	d.fresh = 0
	sorted := d.sorted[:d.n]
	copy(sorted, d.ring[:d.n])
	d.mu.Unlock()
	defer d.computing.Unlock()
	slices.Sort(sorted)
	if s.hedgeQ > 0 {
		d.hedgeAt.Store(int64(kmQuantile(sorted, s.hedgeQ)))
	}
	if l := s.learn; l != nil {
		d.limitAt.Store(int64(learnedLimit(l, kmQuantile(sorted, l.quantile()))))
	}
}

// kmQuantile returns the smallest latency at which the Kaplan–Meier
// estimate of P(latency ≤ t) reaches q, from samples sorted ascending. A
// censored sample stays "at risk" up to its duration and then leaves
// without counting as an answer, so attempts canceled as losers neither
// pull the estimate down (as counting them as answers would) nor vanish
// (as recording only winners would, which drifts the estimate shorter
// under hedging). When censoring keeps the estimate below q, it returns the
// largest sample: the quantile is at least that. 0 for no samples.
func kmQuantile(sorted []uint64, q float64) time.Duration {
	atRisk := len(sorted)
	survival := 1.0
	for _, s := range sorted {
		if s&1 == 0 {
			survival *= 1 - 1/float64(atRisk)
			// A small tolerance so that k answers of n reach k/n.
			if 1-survival >= q-1e-9 {
				return time.Duration(s >> 1)
			}
		}
		atRisk--
	}
	if len(sorted) == 0 {
		return 0
	}
	return time.Duration(sorted[len(sorted)-1] >> 1)
}

// learnedLimit derives an attempt limit from the learned quantile.
func learnedLimit(l *LearnedTimeout, q time.Duration) time.Duration {
	f := float64(q) * l.factor()
	lim := time.Duration(math.MaxInt64)
	if f < float64(math.MaxInt64) {
		lim = time.Duration(f)
	}
	lim = max(lim, durationOr(l.Min, DefaultLearnedMin))
	if l.Max > 0 {
		lim = min(lim, l.Max)
	}
	return lim
}

// hedgeDelay is the adaptive hedge delay, and whether enough samples are
// held to use it.
func (d *latencyDist) hedgeDelay(h *Hedging) (time.Duration, bool) {
	if d.held.Load() < int64(h.minSamples()) {
		return 0, false
	}
	return max(time.Duration(d.hedgeAt.Load()), h.minDelay()), true
}

// attemptLimit is the learned attempt limit, 0 when none is learned yet:
// fewer than l's MinSamples latencies are held.
func (d *latencyDist) attemptLimit(l *LearnedTimeout) time.Duration {
	if d.held.Load() < int64(l.minSamples()) {
		return 0
	}
	return time.Duration(d.limitAt.Load())
}

// depositExtra adds an operation's share to the extra-load cap.
func (d *latencyDist) depositExtra(load float64) {
	add := int64(load * tokenUnit)
	for {
		old := d.extra.Load()
		n := min(old+add, hedgeBurst*tokenUnit)
		if n == old || d.extra.CompareAndSwap(old, n) {
			return
		}
	}
}

// withdrawExtra takes a token for a hedge, and reports whether there was
// one.
func (d *latencyDist) withdrawExtra() bool {
	for {
		old := d.extra.Load()
		if old < tokenUnit {
			return false
		}
		if d.extra.CompareAndSwap(old, old-tokenUnit) {
			return true
		}
	}
}

// refundExtra gives back a token for a hedge that was then not sent.
func (d *latencyDist) refundExtra() { d.depositExtra(1) }
