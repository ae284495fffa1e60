package httpretry

import (
	"net/http"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
	"github.com/httpretry/httpretry/internal/latency"
)

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

// Hedging turns on hedged requests for a [Transport]: when an attempt of a
// request that is safe to repeat has not answered after a delay, another
// attempt starts while the first keeps going, and the first answer that
// ends the operation wins; the others are canceled. Hedges cut the tail of
// latency that retries cannot help with, a request that is merely slow,
// at the cost of extra requests: each hedge withdraws a token from the
// Transport's Budget, and about MaxExtraLoad of the operations hedge,
// never more than twice that after a burst of 10.
//
// The zero value, &Hedging{}, is the adaptive setting most callers want:
// the delay is the 98th percentile of the attempt latencies recently seen
// for the request's host, at least 1ms, no hedge before 100 of them are
// known, and about 2% of operations hedge: when the whole server slows, at
// most 4% after a burst of 10 (see MaxExtraLoad). Attempts count against the
// Transport's MaxAttempts: with the default 3, an operation sends at most
// two hedges (or retries) besides its first attempt, all within one
// deadline.
//
// Only requests that may be repeated and whose body can be sent again
// ([http.Request.GetBody], or a body the Transport buffers) are hedged.
// A request that is not idempotent by its method is never hedged, even
// with an idempotency key, unless Deduplicates says the server merges
// concurrent duplicates: a key only protects against a duplicate that
// arrives after the first has finished.
//
// A Hedging must not be changed after the Transport's first use.
type Hedging struct {
	// Delay is how long an attempt may go unanswered before a hedge is
	// sent. 0 (or negative) means adaptive: the (1 − MaxExtraLoad)
	// quantile of recent attempt latency for the request's Key, no less
	// than MinDelay, and no hedge at all until MinSamples latencies are
	// known.
	Delay time.Duration

	// MaxExtraLoad is the share of operations expected to send a hedge:
	// it sets the adaptive delay's quantile (1 − MaxExtraLoad), so that
	// about this share of operations outlast it. The cap on hedges, per
	// Key, refills at twice this share with a burst of 10, with a fixed
	// Delay as with the adaptive one: a hedge beyond it waits, and is
	// asked for again after the delay while its operation runs. A hedge
	// the Budget refuses ends hedging for its operation. A refused hedge
	// is reported in [Outcome.HedgesRefused] and never ends an attempt
	// already running.
	// 0 (or a value outside (0, 1)) means 0.02.
	MaxExtraLoad float64

	// MinDelay is the adaptive delay's floor. 0 (or negative) means 1ms.
	MinDelay time.Duration

	// MinSamples is how many latencies a key must have recorded before
	// its adaptive delay is used; until then requests are not hedged.
	// 0 (or negative) means 100.
	MinSamples int

	// Base sends the hedges, so that they can use another connection
	// pool than the first attempt: over HTTP/2 every request to one
	// address rides the same connection and reaches the same backend,
	// which a hedge meant to avoid a slow backend must not. If nil,
	// hedges go to the Transport's Base.
	Base http.RoundTripper

	// FinishLosers, when positive, lets the attempts that lose run on
	// after the winner, for up to this long, so that their responses are
	// drained and their connections reused; over HTTP/1.1 a canceled
	// attempt closes its connection. After it they are canceled. Only
	// losers outlive the caller's context: the winner's body ends when
	// the caller cancels, as without FinishLosers. 0 (or negative)
	// cancels losers as soon as the winner is known.
	FinishLosers time.Duration

	// Deduplicates states that the server merges concurrent duplicates of
	// a request that carries an idempotency key: a second copy that
	// arrives while the first is running gets the first one's answer (or
	// a 409 "in progress" that the Transport treats as no answer at all),
	// never a second execution. Only then are requests that are not
	// idempotent by their method hedged, and only those with a key. If
	// false, they are never hedged.
	Deduplicates bool

	// Key names the latency distribution a request belongs to, for the
	// adaptive delay and the learned attempt limit: a bounded name such as
	// a host or a route template, never a path with identifiers. If nil,
	// the request's host, lower-case and without the scheme's default
	// port, as [throttle.Throttle] keys it.
	Key func(req *http.Request) string

	// MaxKeys bounds the number of keys that keep latencies; past it, a
	// new key takes the place of one not used lately (the rule a
	// [throttle.Throttle]'s destinations follow), which starts again with
	// no latencies when it comes back. Each key holds 2048 latencies
	// (16 KiB) and a sorting buffer of the same size. 0 (or negative)
	// means 32.
	MaxKeys int
}

// LearnedTimeout derives each attempt's time limit from the latencies the
// Transport has observed for the request's key, the same ones the adaptive
// hedge delay uses: the Quantile of recent latency times Factor, within
// [Min, Max]. A request whose key has fewer than MinSamples latencies gets
// no learned limit. The Transport's AttemptTimeout, when set, caps the
// learned limit; the operation's deadline (the caller's context and
// Timeout) bounds every attempt as always.
//
// With 2048 latencies kept per key, a quantile as high as the default
// 99.9th rests on the two slowest of them: keep Factor generous.
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

// HedgeDelay reports the delay after which a request of the given key
// would be hedged now, and whether it would be hedged at all: false when
// Hedging is nil, when MaxAttempts leaves no room for a second attempt, or
// when the adaptive delay has too few latencies yet.
// The key is what [Hedging.Key] returns (the host, by default). Metrics
// read it for a gauge of the current delay.
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
	if t.Hedging != nil {
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
