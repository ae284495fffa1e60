// Package latency holds the latency estimator behind httpretry's adaptive
// hedge delay and learned attempt limit: per key, the most recent attempt
// latencies, a Kaplan–Meier quantile over them that counts a canceled
// attempt as "at least this long", and the extra-load cap on hedges.
//
// It takes resolved numbers (a quantile, a factor, a bound), never the
// Transport's configuration: the defaults are the caller's to apply.
package latency

import (
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
)

// Window is how many recent latencies a key keeps: 2048 samples of 8
// bytes, plus a sorting buffer of the same size, 32 KiB per key. At 200
// requests a second it spans about ten seconds of traffic, so a shift in
// the distribution is followed within that.
const Window = 2048

// tokenUnit is one extra-load token in the fixed-point units the cap
// counts in.
const tokenUnit = 1_000_000

// Config is what a [Set] derives from the latencies it records, with
// every default already applied.
type Config struct {
	// HedgeQuantile is the quantile the hedge delay is, in (0, 1); 0 when
	// no hedge delay is derived.
	HedgeQuantile float64
	// Learn derives an attempt limit; nil when none is.
	Learn *Learn
	// MaxKeys bounds the keys held; a key evicted to make room (by
	// [desttable.Table]'s rule) starts again with no latencies.
	MaxKeys int
	// Burst is how many tokens the extra-load cap of a key holds, and
	// starts with.
	Burst int
}

// Learn is how an attempt limit is derived from a key's latencies: the
// Quantile times Factor, no less than Min and, when Max is positive, no
// more than Max.
type Learn struct {
	Quantile float64
	Factor   float64
	Min      time.Duration
	Max      time.Duration
}

// Set holds the distributions of a Transport's keys. The zero value is
// not usable: make one with [New]. A Set is safe for simultaneous use by
// multiple goroutines.
type Set struct {
	cfg  Config
	keys desttable.Table[Dist]
	init func(*Dist)
}

// New returns an empty set that derives what cfg says.
func New(cfg Config) *Set {
	s := &Set{cfg: cfg}
	s.init = func(d *Dist) {
		d.set = s
		d.extra.Store(int64(cfg.Burst) * tokenUnit)
	}
	return s
}

// Lookup returns key's distribution, adding it (and evicting another when
// the set is full) when key is new.
func (s *Set) Lookup(key string) *Dist {
	return s.keys.Get(key, s.cfg.MaxKeys, s.init)
}

// LookupHost returns the distribution of req's host, keyed as
// desttable.HostKey names it, as Lookup does: a spelling of the host seen
// before finds it without canonicalising the host again.
func (s *Set) LookupHost(req *http.Request) *Dist {
	return s.keys.GetHost(req, s.cfg.MaxKeys, s.init)
}

// Find returns key's distribution, or nil when key holds none. It adds no
// key.
func (s *Set) Find(key string) *Dist { return s.keys.Find(key) }

// Len returns the number of keys held.
func (s *Set) Len() int { return s.keys.Len() }

// Dist is one key's recent latencies and what is derived from them.
// Recording takes no lock, but for the computation it is due for (see
// recomputeDue); reading the derived delay and limit takes none.
type Dist struct {
	set      *Set
	recorded atomic.Int64 // samples ever recorded: the next goes to ring[recorded%Window]
	checked  atomic.Int64 // recorded when the quantiles were last computed, or found not due
	// ring holds the samples, each as slot says: 0 is a slot no Record
	// has written yet.
	ring [Window]atomic.Uint64

	computing  sync.Mutex // protects sorted, computedAt, strideAt and strideN; held while the quantiles are computed
	sorted     [Window]uint64
	computedAt time.Time // the end time of the sample that last had the quantiles computed
	// strideAt and strideN are the end time of the sample and the
	// recorded count at the last computation or change of the stride:
	// every sample recorded since was timed under the stride that holds
	// now, which the rate is measured from.
	strideAt time.Time
	strideN  int64

	// shift is the stride's log2: one attempt in 1<<shift offered to
	// Times is timed (see strideShift); 0 while every one is. offered
	// counts those offered while it is not 0.
	shift   atomic.Int64
	offered atomic.Int64

	hedgeAt atomic.Int64 // the hedge quantile, in nanoseconds, plus one: 0 until it is first computed
	limitAt atomic.Int64 // the learned attempt limit, in nanoseconds; 0 for none
	extra   atomic.Int64 // extra-load tokens, in tokenUnit; starts full
}

// held is the number of samples held, at most Window.
func (d *Dist) held() int64 { return min(d.recorded.Load(), Window) }

// sample encodes a latency for sorting: the duration in the high bits, and
// the lowest bit set when the latency is censored (the attempt was ended
// before it answered, so its latency is at least this). Sorted ascending,
// an answer comes before a censored sample of the same duration, as the
// Kaplan–Meier estimate needs.
func sample(d time.Duration, censored bool) uint64 {
	s := uint64(min(max(d, 0), maxSample)) << 1
	if censored {
		s |= 1
	}
	return s
}

// maxSample is the longest latency a sample holds, 146 years: one more
// bit and a sample would fill its slot's 64 (see slot).
const maxSample = time.Duration(1<<62 - 1)

// slot is how sample s is held in the ring: one more than s, so that a
// slot taken by a Record that has not written it yet (0) is told from a
// sample of no time at all.
func slot(s uint64) uint64 { return s + 1 }

// Derives reports whether d's latencies derive anything: a hedge delay
// or an attempt limit. Those of a Dist that derives nothing are not
// kept, and its caller need not measure them.
func (d *Dist) Derives() bool {
	cfg := &d.set.cfg
	return cfg.HedgeQuantile > 0 || cfg.Learn != nil
}

// Times reports whether an attempt about to end is timed and its latency
// recorded: never when d derives nothing; else always, but while
// attempts end faster than the window holds between two computations of
// the quantiles, when it is the one of its block of a stride's attempts
// (see strideShift) that a hash of the block's number picks. The place
// in the block changes from block to block, so that traffic that repeats
// with a period (three small requests, then a large one; a hedge's
// winner, then its loser) has every part of it timed alike. A caller
// told false need not read the clock for the attempt's end.
func (d *Dist) Times() bool {
	if !d.Derives() {
		return false
	}
	sh := d.shift.Load()
	if sh == 0 {
		return true
	}
	n, mask := uint64(d.offered.Add(1)), uint64(1)<<sh-1
	return n&mask == mix(n>>sh)&mask
}

// mix is splitmix64's finalizer: a block number's bits, spread.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// maxShift is the largest stride's log2: one attempt in 64 timed.
const maxShift = 6

// strideShift returns the log2 of the stride for attempts ending at the
// rate of attempts in span: the least power of two s, at most
// 1<<maxShift, such that fewer than 2 × Window attempts timed, one in s,
// end in RecomputeEvery. Every latency timed then stays in the window
// until the next computation (at most RecomputeEvery later once the
// window is full) or the one after, where timing every attempt would
// have the window overwrite most latencies before any computation read
// them and hold only the last few milliseconds of a fast client's
// traffic. The attempts timed are chosen by their count, not by their
// latency: the sample stays unbiased. 0 (every attempt) while fewer than
// Window latencies are held (held), none overwritten yet, and when span
// is not positive.
func strideShift(held, attempts int64, span time.Duration) int64 {
	if held < Window || span <= 0 {
		return 0
	}
	perComputation := float64(attempts) * float64(RecomputeEvery) / float64(span)
	var sh int64
	for sh < maxShift && perComputation >= float64(int64(2*Window)<<sh) {
		sh++
	}
	return sh
}

// Record adds a latency, of an attempt that started at start (and ended
// lat later, a time computed only when a computation is considered; with
// start zero, the attempt ended now, on the system clock),
// and, every so often, recomputes the quantiles (see recomputeDue): the
// cost of sorting, about 50µs for a full window, is spread over the
// samples. Only the
// computation takes a lock, and is skipped when another is under way; a
// sample recorded while the window is copied for it may be missed by it,
// and a slot taken but not written yet is left out.
func (d *Dist) Record(lat time.Duration, censored bool, start time.Time) {
	if !d.Derives() {
		return // kept for nothing
	}
	i := d.recorded.Add(1)
	d.ring[(i-1)%Window].Store(slot(sample(lat, censored)))
	n := min(i, Window)
	if i-d.checked.Load() < max(1, n/16) && d.shift.Load() == 0 {
		return // what every sample but one in n/16 costs: no lock
	}
	if !d.computing.TryLock() {
		return
	}
	defer d.computing.Unlock()
	fresh := i - d.checked.Load()
	end := start.Add(lat)
	if start.IsZero() {
		end = time.Now()
	}
	if !recomputeDue(int(n), int(fresh), end.Sub(d.computedAt)) {
		if fresh >= max(1, n/16) {
			d.checked.Store(i) // too soon: asked again after n/16 more
		} else if end.Sub(d.strideAt) >= RecomputeEvery {
			// A stride set while attempts came fast follows their
			// rate down without waiting for n/16 latencies.
			d.setStride(n, i, end, false)
		}
		return
	}
	d.checked.Store(i)
	d.setStride(n, i, end, true)
	d.computedAt = end
	sorted := d.sorted[:0]
	for j := range n {
		// A slot another Record took and has not written yet holds
		// no sample: it is left out, not counted as no time at all.
		if v := d.ring[j].Load(); v != 0 {
			sorted = append(sorted, v-1)
		}
	}
	slices.Sort(sorted)
	cfg := &d.set.cfg
	if cfg.HedgeQuantile > 0 {
		d.hedgeAt.Store(int64(kmQuantile(sorted, cfg.HedgeQuantile)) + 1)
	}
	if l := cfg.Learn; l != nil {
		d.limitAt.Store(int64(learnedLimit(l, kmQuantile(sorted, l.Quantile))))
	}
}

// setStride sets the stride from the rate of the attempts that ended
// since its base (every one timed, one in the stride that holds), at the
// i-th sample, ending at end, n held; the base moves to that sample when
// the stride changes, or always (at a computation).
func (d *Dist) setStride(n, i int64, end time.Time, always bool) {
	sh := d.shift.Load()
	next := strideShift(n, (i-d.strideN)<<sh, end.Sub(d.strideAt))
	if next != sh || always {
		d.shift.Store(next)
		d.strideAt, d.strideN = end, i
	}
}

// RecomputeEvery is the least time between two computations of a full
// window's quantiles: a client that sends thousands of requests a second
// to one key sorts its window ten times a second, not after every
// Window/16 of them.
const RecomputeEvery = 100 * time.Millisecond

// recomputeDue reports whether the quantiles of n samples held are
// recomputed after fresh samples recorded since they last were, since
// when the samples' end times tell that sinceLast passed: after every
// sample while few are held, then after every n/16 (128 once the window is
// full), and, once it is full, no sooner than RecomputeEvery.
func recomputeDue(n, fresh int, sinceLast time.Duration) bool {
	if fresh < max(1, n/16) {
		return false
	}
	return n < Window || sinceLast >= RecomputeEvery
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

// learnedLimit derives an attempt limit from the learned quantile q.
func learnedLimit(l *Learn, q time.Duration) time.Duration {
	f := float64(q) * l.Factor
	lim := time.Duration(math.MaxInt64)
	if f < float64(math.MaxInt64) {
		lim = time.Duration(f)
	}
	lim = max(lim, l.Min)
	if l.Max > 0 {
		lim = min(lim, l.Max)
	}
	return lim
}

// HedgeDelay is the adaptive hedge delay, no less than floor, and whether
// at least minSamples latencies are held to use it.
func (d *Dist) HedgeDelay(minSamples int, floor time.Duration) (time.Duration, bool) {
	if d.held() < int64(minSamples) {
		return 0, false
	}
	at := d.hedgeAt.Load()
	if at == 0 {
		// Slots taken, not written yet: no quantile was computed.
		return 0, false
	}
	return max(time.Duration(at-1), floor), true
}

// AttemptLimit is the learned attempt limit, 0 when none is learned yet:
// fewer than minSamples latencies are held.
func (d *Dist) AttemptLimit(minSamples int) time.Duration {
	if d.held() < int64(minSamples) {
		return 0
	}
	return time.Duration(d.limitAt.Load())
}

// DepositExtra adds an operation's share, in tokens, to the extra-load
// cap, which holds at most the set's Burst.
func (d *Dist) DepositExtra(share float64) {
	add := int64(share * tokenUnit)
	full := int64(d.set.cfg.Burst) * tokenUnit
	for {
		old := d.extra.Load()
		n := min(old+add, full)
		if n == old || d.extra.CompareAndSwap(old, n) {
			return
		}
	}
}

// WithdrawExtra takes a token for a hedge, and reports whether there was
// one.
func (d *Dist) WithdrawExtra() bool {
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

// Held is the number of latencies held now, at most Window, for tests.
func (d *Dist) Held() int64 { return d.held() }

// ExtraTokens is the number of extra-load tokens held now, for tests.
func (d *Dist) ExtraTokens() float64 { return float64(d.extra.Load()) / tokenUnit }

// RefundExtra gives back a token for a hedge that was then not sent.
func (d *Dist) RefundExtra() { d.DepositExtra(1) }
