package httpretry

import (
	"net/http"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
	"github.com/httpretry/httpretry/internal/latency"
)

// This file holds hedging's settings (Hedging, its defaults and how its
// zero values resolve) and the latency it learns per key; the loop of a
// hedged operation is in hedgeloop.go.

// Defaults for the zero values of Hedging's fields.
const (
	// DefaultMaxExtraLoad is the share of operations that may send a
	// hedge when Hedging.MaxExtraLoad is 0: the adaptive delay is then the
	// 98th percentile of recent attempt latency.
	DefaultMaxExtraLoad = 0.02
	// DefaultMinHedgeDelay is the adaptive delay's floor when
	// Hedging.MinDelay is 0.
	DefaultMinHedgeDelay = time.Millisecond
	// DefaultHedgeMinSamples is how many latencies a key must have
	// recorded before its adaptive hedge delay is used, when
	// Hedging.MinSamples is 0.
	DefaultHedgeMinSamples = 100
	// DefaultHedgeMaxKeys is how many keys keep latencies when
	// Hedging.MaxKeys is 0; past it, one not used lately is forgotten.
	DefaultHedgeMaxKeys = 32
	// hedgeBurst is how many hedges beyond the MaxExtraLoad share a key
	// may send in a burst: the extra-load cap is a bucket of this many
	// tokens that every operation adds hedgeHeadroom × MaxExtraLoad of a
	// token to.
	hedgeBurst = 10
	// hedgeHeadroom is how far above the MaxExtraLoad share the cap
	// refills: the adaptive delay asks for hedges at about that share,
	// and late answers bunched together (a pause, a busy core) must not
	// find the cap empty.
	hedgeHeadroom = 2
)

// Hedging turns on hedged requests: when an attempt of a request that is
// safe to repeat has not answered after a delay, another attempt starts
// while the first keeps going; the first answer that ends the operation
// wins and the others are canceled. Each hedge takes a Budget token and
// counts against MaxAttempts.
//
// The zero value, &Hedging{}, is adaptive: the delay is the 98th percentile
// of the latencies recently seen for the request's host, at least 1ms,
// after 100 of them, so that about 2% of operations hedge. Only requests
// whose body can be sent again are hedged, and a request that is not
// idempotent by its method only with Deduplicates (see docs/hedging.md).
// A Hedging must not be changed after the Transport's first use.
type Hedging struct {
	// Delay is how long an attempt may go unanswered before a hedge is sent.
	// 0 (or negative) means adaptive: the (1 − MaxExtraLoad) quantile of
	// recent latency for the request's Key, at least MinDelay, once
	// MinSamples latencies are known.
	Delay time.Duration

	// MaxExtraLoad is the share of operations expected to hedge; the cap on
	// hedges per Key refills at twice it, with a burst of 10. A hedge refused
	// by the cap, the Budget or the Throttle is counted in
	// [Outcome.HedgesRefused]. 0 (or
	// a value outside (0, 1)) means 0.02.
	MaxExtraLoad float64

	// MinDelay is the adaptive delay's floor. 0 (or negative) means 1ms.
	MinDelay time.Duration

	// MinSamples is how many latencies a key needs before its adaptive delay
	// is used. 0 (or negative) means 100.
	MinSamples int

	// Base sends the hedges, so that they can use another connection pool
	// than the first attempt (over HTTP/2 one pool reaches one backend). If
	// nil, the Transport's Base.
	Base http.RoundTripper

	// FinishLosers, when positive, lets the losing attempts run on for up to
	// this long after the winner, so that their connections are kept. 0 (or
	// negative) cancels them as soon as the winner is known.
	FinishLosers time.Duration

	// Deduplicates states that the server merges concurrent duplicates of a
	// request with an idempotency key; only then are keyed requests that are
	// not idempotent by their method hedged.
	Deduplicates bool

	// Key names the latency distribution of a request, for the adaptive
	// delay and the learned attempt limit: a bounded name, never a path with
	// identifiers. If nil, the request's host in its canonical spelling.
	// It is called once per operation.
	Key func(req *http.Request) string

	// MaxKeys bounds the keys that keep latencies (about 32 KiB each); past
	// it one not used lately is forgotten. 0 (or negative) means 32.
	MaxKeys int
}

// LearnedTimeout derives each attempt's time limit from the latencies seen
// for the request's key: the Quantile of recent latency times Factor,
// within [Min, Max], once MinSamples are known. AttemptTimeout, when set,
// caps it. With 2048 latencies kept, a p99.9 rests on the two slowest:
// keep Factor generous.
type LearnedTimeout struct {
	// Quantile is the latency quantile the limit is derived from, in
	// (0, 1). 0 (or a value outside (0, 1)) means 0.999.
	Quantile float64
	// Factor multiplies the quantile. 0 (or a value below 1) means 1.3:
	// a measured p99.9 of 140ms gives a limit of 182ms.
	Factor float64
	// Min is the limit's floor. 0 (or negative) means 10ms.
	Min time.Duration
	// Max is the limit's ceiling. 0 (or negative) means no ceiling but
	// AttemptTimeout.
	Max time.Duration
	// MinSamples is how many latencies a key must have recorded before a
	// limit is learned. 0 (or negative) means 1000.
	MinSamples int
}

// Defaults for the zero values of LearnedTimeout's fields.
const (
	defaultLearnedQuantile   = 0.999
	defaultLearnedFactor     = 1.3
	defaultLearnedMin        = 10 * time.Millisecond
	defaultLearnedMinSamples = 1000
)

// HedgeDelay reports the delay after which a request of the given key (as
// [Hedging.Key] names it) would be hedged now, and whether it would be
// hedged at all: not without Hedging, room for a second attempt, or enough
// latencies. Metrics read it for a gauge.
func (t *Transport) HedgeDelay(key string) (time.Duration, bool) {
	h := t.Hedging
	if h == nil || t.maxAttempts() < 2 {
		return 0, false
	}
	if h.Delay > 0 {
		return h.Delay, true
	}
	d := t.latencies().Find(key)
	if d == nil {
		return 0, false
	}
	return d.HedgeDelay(h.minSamples(), h.minDelay())
}

func (h *Hedging) maxExtraLoad() float64 {
	if !(h.MaxExtraLoad > 0 && h.MaxExtraLoad < 1) {
		return DefaultMaxExtraLoad
	}
	return h.MaxExtraLoad
}

func (h *Hedging) minDelay() time.Duration { return durationOr(h.MinDelay, DefaultMinHedgeDelay) }

func (h *Hedging) minSamples() int {
	if h.MinSamples <= 0 {
		return DefaultHedgeMinSamples
	}
	return h.MinSamples
}

func (h *Hedging) maxKeys() int {
	if h == nil || h.MaxKeys <= 0 {
		return DefaultHedgeMaxKeys
	}
	return h.MaxKeys
}

func (l *LearnedTimeout) quantile() float64 {
	if !(l.Quantile > 0 && l.Quantile < 1) {
		return defaultLearnedQuantile
	}
	return l.Quantile
}

func (l *LearnedTimeout) factor() float64 {
	if !(l.Factor >= 1) {
		return defaultLearnedFactor
	}
	return l.Factor
}

func (l *LearnedTimeout) minSamples() int {
	if l.MinSamples <= 0 {
		return defaultLearnedMinSamples
	}
	return l.MinSamples
}

// latencyKey names the distribution req's latencies belong to.
func (t *Transport) latencyKey(req *http.Request) string {
	if h := t.Hedging; h != nil && h.Key != nil {
		return desttable.BoundKey(h.Key(req))
	}
	return desttable.HostKey(req)
}

// latencyDist returns the latencies of req's key, as latencyKey names
// it: a host's spelling seen before finds them without canonicalising
// the host again.
func (t *Transport) latencyDist(req *http.Request) *latency.Dist {
	if h := t.Hedging; h != nil && h.Key != nil {
		return t.latencies().Lookup(t.latencyKey(req))
	}
	return t.latencies().LookupHost(req)
}

// latencies returns t's latency set, created on first use, or nil when t
// records no latencies.
func (t *Transport) latencies() *latency.Set {
	if !t.learns() {
		return nil
	}
	if s := t.latencySet.Load(); s != nil {
		return s
	}
	cfg := latency.Config{MaxKeys: t.Hedging.maxKeys(), Burst: hedgeBurst}
	if t.Hedging != nil && t.Hedging.Delay <= 0 {
		// Only an adaptive Delay derives from the latencies: with a
		// fixed one the set keeps the extra-load cap, and latencies
		// only for a learned limit.
		cfg.HedgeQuantile = 1 - t.Hedging.maxExtraLoad()
	}
	if l := t.LearnAttemptTimeout; l != nil {
		cfg.Learn = &latency.Learn{Quantile: l.quantile(), Factor: l.factor(), Min: durationOr(l.Min, defaultLearnedMin), Max: l.Max}
	}
	t.latencySet.CompareAndSwap(nil, latency.New(cfg))
	return t.latencySet.Load()
}

// learns reports whether t records attempt latencies at all.
func (t *Transport) learns() bool { return t.Hedging != nil || t.LearnAttemptTimeout != nil }
