package throttle

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
)

// Defaults for the zero values of Throttle's fields.
const (
	DefaultK         = 2
	DefaultMaxReject = 0.9
	DefaultWindow    = 600 * time.Millisecond
	DefaultMinRate   = 1 // requests per second
	// DefaultMaxKeys is how many destinations a Throttle keeps state
	// for when MaxKeys is 0.
	DefaultMaxKeys = desttable.DefaultMax
)

// Bounds on Throttle's fields: a smaller value is taken as the bound.
const (
	// minK is the least K used; see [Throttle].K.
	minK = 1.5
	// minWindow is the least Window used: ten buckets of 1ms.
	minWindow = throttleBuckets * time.Millisecond
)

// ErrThrottled is the error of an attempt the Throttle refused: the
// destination has been signalling overload, or its rate-limit quota is
// spent ([ErrQuotaExhausted] matches it too, with [errors.Is]).
var ErrThrottled = errors.New("throttle: refused locally: the destination is overloaded")

// Throttle refuses some attempts while their destination signals
// overload, so that an outage does not keep the server busy with work it
// will refuse: client-side adaptive throttling. Over a sliding window,
// per destination, it counts the attempts sent and refused (requests)
// and those the server accepted (accepts), and refuses an attempt, the
// first of an operation or a retry, with probability
//
//	p = min(MaxReject, max(0, (requests − K·accepts) / (requests + 1)))
//
// so that the server sees at most about K times what it accepts,
// retries included. An attempt is accepted unless its caller says it
// signalled overload ([Result].Overload); one the server said nothing of
// counts for neither. A refusal never blocks: [Throttle.Admit] and
// [Throttle.AdmitRetry] return [ErrThrottled] at once.
//
// It also paces by the quota a server announces (see [ParseRateLimit]):
// once a response says a destination's quota is spent, new operations to
// it are refused with [ErrQuotaExhausted] until the quota's reset.
// Retries and hedges take from the quota too ([Throttle.TakeQuota]), so
// that the server sees no more than it granted. Where a destination has
// several quotas, a retry is paced by the one its attempt's answer named
// ([Throttle.QuotaSpent]).
//
// With httpretry, set Transport.Throttle to a *Throttle: the Transport
// then calls Admit before an operation's first attempt, AdmitRetry,
// QuotaSpent and TakeQuota before each retry or hedge, and Record after
// each attempt; an operation it refuses fails at once with an error that
// matches ErrThrottled, and a retry it refuses ends the operation with
// its last answer. Transports that share one Throttle share its counts.
// On its own, a caller does the same around each request it sends.
//
// The zero value is ready to use: K 2, at most 90% refused, a window of
// 600ms in ten buckets reaching back up to 3s at low rates, no refusal
// below 1 request per second, destinations keyed by host, at most
// [DefaultMaxKeys] of them. A Throttle is safe for simultaneous use by
// multiple goroutines; its fields must not be changed after its first
// use, and it must not be copied after its first use.
type Throttle struct {
	// K is how many requests per accepted one the destination may see
	// before the throttle refuses any. 0 (or less), NaN or an infinity
	// means 2. A K below 1.5 means 1.5: at K ≤ 1 a
	// server that accepts every admitted attempt never sees the refusals
	// fall (a share a admitted gives p = 1 − K·a back), and just above 1
	// the admitted share takes tens of seconds to recover.
	K float64

	// MaxReject caps the probability of a refusal, so that some traffic
	// always reaches the server to see it heal. 0 (or less), NaN or an
	// infinity means 0.9; finite values above 1 mean 1.
	MaxReject float64

	// Window is how far back the counts reach: they sit in ten buckets of
	// Window/10 each, and the oldest is dropped as time moves on, so a
	// healed server is trusted again within about two windows: the
	// admitted share grows by a factor of e every Window/K. 0 (or less)
	// means 600ms, with which 95% are admitted again about 1.1s after a
	// server heals from a long outage. Where the window holds fewer
	// than 10 requests (a destination called a few times a second), the
	// counts reach back over older buckets until they hold 10, at most 5
	// windows back; past the window, from the first bucket that holds an
	// accept on, only accepts are counted: a few failures in a short
	// window would otherwise refuse too little to relieve a dead server,
	// or refuse a healthy one for two failures in a row, and the failures
	// from before an accept no longer describe the server. A Window
	// below 10ms means 10ms, so that no bucket is narrower
	// than a millisecond.
	Window time.Duration

	// MinRate is the request rate per second, over the time the counts
	// reach back (see Window), below which the throttle never refuses: a
	// few failures of a destination called rarely say little. Nor does
	// it refuse on fewer than 10 requests counted: the fewest for which a
	// server accepting 70% of its attempts shows fewer than one accept in
	// K with a chance of at most 5%. 0, NaN or +Inf means 1; a negative
	// value means no minimum, neither the rate nor the 10 requests.
	MinRate float64

	// Key names a request's destination. It must return a short, bounded
	// name (never a path or a query): each distinct key holds about a
	// kilobyte of state, and only its first 300 bytes are kept. If nil,
	// the request URL's host in one canonical spelling (lower-case,
	// without a trailing dot or the scheme's default port, an IP address
	// as net/netip writes it), so that every spelling of a host is one
	// destination. It is called once per call of Dest (httpretry calls
	// Dest once per operation).
	Key func(req *http.Request) string

	// MaxKeys bounds the destinations held; past it, one not used lately
	// is forgotten to make room, never one whose quota was last found
	// spent or paused while others can go. 0 (or less) means
	// [DefaultMaxKeys].
	MaxKeys int

	// IgnoreQuota turns quota pacing off: the rate-limit headers of
	// responses are not read.
	IgnoreQuota bool

	// WaitQuota asks the caller to hold an operation whose destination's
	// quota is spent until the quota resets, instead of refusing it, when
	// the reset comes soon enough: httpretry's Transport waits when the
	// reset comes no later than its MaxRetryAfter, with MinAttemptTime
	// left before the operation's deadline, and asks again, holding it
	// again while the next reset fits. Where a pause ends with the new
	// window's count not known, the operations held are let go one at a
	// time, each as an answer arrives ([Throttle.QuotaReleased]).
	WaitQuota bool

	// Shared, if set, shares the counts with the other processes of a
	// fleet, so that each decides on the fleet's counts (see [Shared]):
	// a process that sends a few requests a second then refuses during
	// an outage, and admits again after the heal, as one process
	// sending the whole fleet's requests would. Destinations are then
	// keyed by Key, or by host, without the cache of host spellings. If
	// nil, each process decides on its own counts.
	Shared Shared

	// draws, if set, draws the number in [0, 1) of each decision that
	// may refuse, in place of math/rand/v2's Float64 (throttleseam.SetDraw,
	// for tests). A NaN admits.
	draws func() float64

	dests desttable.Table[Dest]
}

// throttleBuckets is how many buckets the window is cut into;
// throttleRing is how many are kept, for the window to reach back at low
// rates.
const (
	throttleBuckets = 10
	throttleRing    = 5 * throttleBuckets
)

// throttleSamples is the fewest requests the counts reach back for, and
// the fewest on which the throttle refuses any (unless MinRate is
// negative): see samplesFor.
var throttleSamples = float64(samplesFor(healthyAccepts, DefaultK, healthyMisread, maxSamples))

func (th *Throttle) k() float64 {
	return max(positiveOr(th.K, DefaultK), minK)
}

func (th *Throttle) maxReject() float64 {
	return min(positiveOr(th.MaxReject, DefaultMaxReject), 1)
}

// positiveOr returns x when it is positive and finite, else def: a NaN or
// an infinity in a field is never taken as a rate or a share.
func positiveOr(x, def float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return def
	}
	return x
}

// minRequests is the least number of requests counted over span for
// which the throttle refuses any: MinRate a second over span, and at
// least throttleSamples; none with a negative MinRate.
func (th *Throttle) minRequests(span time.Duration) float64 {
	if th.MinRate < 0 {
		return 0
	}
	return max(positiveOr(th.MinRate, DefaultMinRate)*span.Seconds(), throttleSamples)
}

func (th *Throttle) rand() float64 {
	if th.draws != nil {
		return th.draws()
	}
	return rand.Float64()
}

// Dest is one destination's counts. While the destination has
// signalled nothing for as far back as the counts reach (cold), accepted
// attempts are only counted in pending, without reading the clock but
// for the destination's first accept; the first overload signal folds
// them into the window, spread evenly over the time since the last fold
// (or since that first accept), and makes the state hot: from then on
// every decision reads the clock and works on the window under mu, until
// the whole ring has passed without a signal or a refusal.
//
// The counts are the destination's, whatever credential its requests
// carry; the quota is one credential's (see [Throttle.Dest]): a Dest of
// a credential shares its destination's counts and holds a quota of its
// own.
type Dest struct {
	*counts
	quota quotaState
	creds desttable.Table[Dest] // the destination's credentials, each with its own quota; empty in a credential's Dest
	host  *Dest                 // in a credential's Dest, its destination's; nil in a destination's

	// credsPinned counts the credentials whose quota was last found
	// refusing, pinned since credsPinnedSince (see destPinned).
	credsPinned      atomic.Int32
	credsPinnedSince atomic.Int64
}

// counts is a destination's overload counts, shared by the Dests of its
// credentials.
type counts struct {
	hot     atomic.Bool
	pending atomic.Int64              // accepted attempts not yet in w
	first   atomic.Int64              // the stamp (see stamp) of the first accept counted in pending, 0 before
	fleet   atomic.Pointer[fleetLink] // where the counts are shared; nil without a Shared
	linked  atomic.Bool               // fleet is set

	mu         sync.Mutex // protects the fields below
	w          window
	lastFold   time.Time
	lastSignal time.Time // the last overload signal or refusal
}

// refuse draws whether an attempt to the hot destination s is refused,
// and counts a refusal as a request. It returns ErrThrottled when
// refused.
func (th *Throttle) refuse(s *Dest, clock Clock) error {
	r := th.rand()
	now := clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sync(th, now)
	req, acc, n := th.decisionCounts(s, now)
	span := time.Duration(n) * th.window() / throttleBuckets
	// Written so that a NaN draw or probability admits.
	if !(r < th.RefuseProbability(req, acc, span)) {
		return nil
	}
	// A refusal counts as a request: the SRE form needs it to keep
	// refusing while nothing is accepted.
	s.w.add(1, 0)
	s.lastSignal = now
	if th.Shared != nil {
		// Refused on the fleet's counts, s takes part in them.
		s.hot.Store(true)
		th.share(s, now, 1, 0)
	}
	return ErrThrottled
}

// countPending counts an accept of a cold destination in pending, and
// returns the count pending with it when that is an edge: the first
// accept pending (n == 1), whose time is stamped, or the pendingFold-th,
// which folds them into the window (see countEdge); 0 otherwise, which is
// all it costs: an atomic addition.
func (s *Dest) countPending() int64 {
	if n := s.pending.Add(1); uint64(n-2) >= pendingFold-2 { // n == 1 || n >= pendingFold
		return n
	}
	return 0
}

// countEdge is what an edge of countPending costs more: the first accept
// pending (n == 1) stamps when it came, the pendingFold-th folds them; it
// reports whether it folded them.
func (th *Throttle) countEdge(s *Dest, n int64, clock Clock) bool {
	if n == 1 && s.first.Load() == 0 {
		s.first.CompareAndSwap(0, stamp(clock.Now()))
	}
	if n < pendingFold {
		return false
	}
	now := clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sync(th, now)
	return true
}

// request counts an attempt sent that is neither an accept nor an
// overload signal: a hedge canceled when an answer that signalled
// overload won. Only a hot destination counts it: a cold one refuses
// nothing, and the winner's signal has just made it hot.
func (th *Throttle) request(s *Dest, clock Clock) {
	if th.hotFor(s) {
		th.tally(s, clock.Now(), 1, 0, false)
	}
}

// accept counts an accepted attempt: in pending while s is cold, in the
// window while it is hot.
func (th *Throttle) accept(s *Dest, clock Clock) {
	if !th.hotFor(s) {
		if n := s.countPending(); n != 0 {
			th.countEdge(s, n, clock)
		}
		return
	}
	th.tally(s, clock.Now(), 1, 1, false)
}

// tally counts req requests and acc accepts in s's window at now; an
// overload signal makes s hot from now.
func (th *Throttle) tally(s *Dest, now time.Time, req, acc float64, signal bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if signal {
		s.hot.Store(true)
		s.lastSignal = now
	}
	s.sync(th, now)
	s.w.add(req, acc)
	th.share(s, now, req, acc)
}

// sync moves s's window to now and folds the pending accepts into it;
// it turns s cold once the whole ring has passed since the last signal.
// s.mu must be held.
func (s *Dest) sync(th *Throttle, now time.Time) {
	width := th.window() / throttleBuckets
	s.w.advance(now, width)
	if n := s.pending.Swap(0); n != 0 {
		head := s.w.spread(float64(n), foldSpan(s.lastFold, s.first.Load(), now, width), width)
		if th.hotFor(s) {
			// Only the head bucket's part is shared: the fleet counts
			// what it is handed in its newest bucket, and the accepts
			// of a healthy spell handed there at an outage's first
			// signal would hide the outage from the whole fleet.
			th.share(s, now, head, head)
		}
	}
	s.lastFold = now
	if now.Sub(s.lastSignal) >= throttleRing*width {
		s.hot.Store(false)
	}
}

// window is a ring of buckets of equal width, the newest at head, each
// counting the requests and accepts of its time. The newest
// throttleBuckets are the window proper; the older ones are kept for
// counts that reach back at low rates.
type window struct {
	b     [throttleRing]bucket
	head  int
	start time.Time // when the head bucket began; zero before the first use
}
