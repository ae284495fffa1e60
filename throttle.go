package httpretry

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/internal/overload"
)

// Defaults for the zero values of Throttle's fields.
const (
	DefaultThrottleK         = 2
	DefaultThrottleMaxReject = 0.9
	DefaultThrottleWindow    = 600 * time.Millisecond
	DefaultThrottleMinRate   = 1 // requests per second
)

// Bounds on Throttle's fields: a smaller value is taken as the bound.
const (
	// MinThrottleK is the least K used; see [Throttle].K.
	MinThrottleK = 1.5
	// MinThrottleWindow is the least Window used: ten buckets of 1ms.
	MinThrottleWindow = throttleBuckets * time.Millisecond
)

// ErrThrottled matches (with [errors.Is]) the error of an operation that a
// [Throttle] refused before its first attempt: the destination has been
// signalling overload, or its rate-limit quota is spent
// ([ErrQuotaExhausted] matches it too). Such an operation made no attempt
// and stops with [Throttled]. A retry the Throttle refuses stops with
// Throttled too, and returns what the last attempt returned.
var ErrThrottled = errors.New("httpretry: refused locally: the destination is overloaded")

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
// retries included. A retry is asked after every other rule allowed it
// and before the retry budget, so a refused retry takes no token. An
// attempt is accepted unless the server signalled overload: a 429, 503 or
// 529 response, a 5xx carrying "X-Should-Retry: false", an attempt that
// timed out, or a refused connection. Any other response, a 4xx included,
// is accepted; an attempt the caller's own context ended counts for
// neither. A refused operation fails at once, never blocks, and returns
// an [*Error] with Reason [Throttled] that matches [ErrThrottled]; an
// operation whose retry is refused stops with Reason Throttled and
// returns its last attempt's response or error, as when its budget is
// exhausted.
//
// It also paces by the quota a server announces (see [ParseRateLimit]):
// once a response says a destination's quota is spent, new operations to
// it are refused with [ErrQuotaExhausted] until the quota's reset, or,
// with WaitQuota, held until then. Retries and hedges take from the
// quota too, so that the server sees no more than it granted: a retry
// that would be sent before a spent quota resets is refused (the
// operation stops with Throttled and returns its last answer), or, with
// WaitQuota, waits for the reset when the deadline and MaxRetryAfter
// allow (else it is refused as without WaitQuota); a hedge is not sent
// while the quota is spent. Where a destination has several quotas, a
// retry is paced by the one its attempt's answer named.
//
// The zero value is ready to use: K 2, at most 90% refused, a window of
// 600ms in ten buckets reaching back up to 3s at low rates, no refusal
// below 1 request per second,
// destinations keyed by host, at most [DefaultMaxDestinations] of them.
// Set Transport.Throttle to a *Throttle to turn it on; transports that
// share one Throttle share its counts. A Throttle is safe for concurrent
// use by multiple goroutines; its fields must not be changed after its
// first use, and it must not be copied after its first use.
type Throttle struct {
	// K is how many requests per accepted one the destination may see
	// before the throttle refuses any. 0 (or less), NaN or an infinity
	// means 2. A K below [MinThrottleK] means MinThrottleK: at K ≤ 1 a
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
	// than 10 requests and no accept (a destination called a few times a
	// second, failing), the counts reach back over older buckets until
	// they hold 10 requests, at most 5 windows back, and never past a
	// bucket that holds an accept: a few failures in a short window
	// would otherwise refuse too little to relieve the server, and the
	// failures from before an accept no longer describe it. A Window
	// below [MinThrottleWindow] means MinThrottleWindow, so that no
	// bucket is narrower than a millisecond.
	Window time.Duration

	// MinRate is the request rate per second, over the time the counts
	// reach back (see Window), below which the throttle never refuses: a
	// few failures of a destination called rarely say little. 0, NaN or
	// +Inf means 1, low enough that each process of a large fleet, calling a
	// shared dependency a couple of times a second, still relieves it; a
	// negative value means no minimum.
	MinRate float64

	// Key names a request's destination. It must return a short, bounded
	// name (never a path or a query): each distinct key holds about a
	// kilobyte of state, and only its first 300 bytes are kept. If nil,
	// the request URL's host in one canonical spelling (lower-case,
	// without a trailing dot or the scheme's default port, an IP address
	// as net/netip writes it), so that every spelling of a host is one
	// destination.
	Key func(req *http.Request) string

	// MaxKeys bounds the destinations held; past it, one not used lately
	// is forgotten to make room. 0 (or less) means [DefaultMaxDestinations].
	MaxKeys int

	// IgnoreQuota turns quota pacing off: the rate-limit headers of
	// responses are not read.
	IgnoreQuota bool

	// WaitQuota holds an operation whose destination's quota is spent
	// until the quota resets, instead of refusing it, when the reset
	// comes soon enough: no later than the Transport's MaxRetryAfter, and
	// with MinAttemptTime left before the operation's deadline.
	WaitQuota bool

	// Rand draws a number in [0, 1) for each decision of an operation
	// that may be refused. If nil, math/rand/v2's Float64. Tests set it.
	Rand func() float64

	dests destinations[throttleState]
}

// throttleBuckets is how many buckets the window is cut into;
// throttleRing is how many are kept, for the window to reach back at low
// rates; throttleSamples is the fewest requests it reaches back for.
const (
	throttleBuckets = 10
	throttleRing    = 5 * throttleBuckets
	throttleSamples = 10
)

func (th *Throttle) k() float64 {
	return max(positiveOr(th.K, DefaultThrottleK), MinThrottleK)
}

func (th *Throttle) maxReject() float64 {
	return min(positiveOr(th.MaxReject, DefaultThrottleMaxReject), 1)
}

// positiveOr returns x when it is positive and finite, else def: a NaN or
// an infinity in a field is never taken as a rate or a share.
func positiveOr(x, def float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return def
	}
	return x
}

func (th *Throttle) window() time.Duration {
	return max(durationOr(th.Window, DefaultThrottleWindow), MinThrottleWindow)
}

// minRequests is the least number of requests counted over span for
// which the throttle refuses any.
func (th *Throttle) minRequests(span time.Duration) float64 {
	rate := th.MinRate
	if rate == 0 || math.IsNaN(rate) || math.IsInf(rate, 1) {
		rate = DefaultThrottleMinRate
	}
	return max(rate, 0) * span.Seconds()
}

func (th *Throttle) rand() float64 {
	if th.Rand != nil {
		return th.Rand()
	}
	return rand.Float64()
}

// dest returns the state of req's destination. A new destination's
// state is its zero value, whose first responses are read for a quota
// (see quotaState).
func (th *Throttle) dest(req *http.Request) *throttleState {
	if th.Key == nil {
		return th.dests.getHost(req, th.MaxKeys, nil)
	}
	return th.dests.get(th.Key(req), th.MaxKeys, nil)
}

// rejectProbability is the probability with which the throttle refuses
// an operation, given the requests and accepts counted in the window: the
// SRE form (requests − k·accepts)/(requests + 1), clamped into
// [0, maxReject], and 0 when fewer than minRequests were counted.
func rejectProbability(requests, accepts, k, maxReject, minRequests float64) float64 {
	if requests < minRequests || requests <= 0 {
		return 0
	}
	p := (requests - k*accepts) / (requests + 1)
	return min(max(p, 0), maxReject)
}

// overloadSignal reports whether an attempt's result says the server is
// overloaded: a 429, 503 or 529; a 5xx with "X-Should-Retry: false"; an
// attempt timeout; a refused connection. Everything else, a 4xx included,
// is an accept.
func overloadSignal(resp *http.Response, err error) bool {
	if err != nil {
		switch ErrorClass(err) {
		case "attempt_timeout", "idle_timeout", "timeout", "connection_refused":
			return true
		}
		return false
	}
	return overload.Response(resp)
}

// throttleState is one destination's counts. While the destination has
// signalled nothing for as far back as the counts reach (cold), accepted
// attempts are only counted in pending, without reading the clock but
// for the destination's first accept; the first overload signal folds
// them into the window, spread evenly over the time since the last fold
// (or since that first accept), and makes the state hot: from then on
// every decision reads the clock and works on the window under mu, until
// the whole ring has passed without a signal or a refusal.
type throttleState struct {
	hot     atomic.Bool
	pending atomic.Int64 // accepted attempts not yet in w
	first   atomic.Int64 // the clock's UnixNano at the first accept counted in pending, 0 before
	quota   quotaState

	mu         sync.Mutex // protects the fields below
	w          window
	lastFold   time.Time
	lastSignal time.Time // the last overload signal or refusal
}

// admit decides whether an operation to s's destination may start now.
// It returns ErrQuotaExhausted, with the time the quota resets, when the
// destination said its quota is spent; ErrThrottled when the throttle
// refuses it; nil when it may start. A destination with no known quota
// that has signalled nothing for a window is admitted without a clock
// reading or a lock.
func (th *Throttle) admit(s *throttleState, clock clockwork.Clock) (time.Time, error) {
	reset, _, err := th.admitCounted(s, nil, clock)
	return reset, err
}

// admitCounted is admit for req (nil when not known), reporting too
// whether a request was counted in the destination's quota, to be given
// back if the operation then sends nothing.
func (th *Throttle) admitCounted(s *throttleState, req *http.Request, clock clockwork.Clock) (time.Time, bool, error) {
	if s.idle() {
		return time.Time{}, false, nil
	}
	return th.decide(s, req, clock)
}

// idle reports whether s's destination has no known quota and has
// signalled nothing for as far back as the counts reach: an operation
// to it is admitted without a clock reading or a lock.
func (s *throttleState) idle() bool { return s.quota.until.Load() == 0 && !s.hot.Load() }

// decide is admit for a destination that has a known quota or is hot. A
// request taken from the quota is given back when the throttle then
// refuses the operation.
func (th *Throttle) decide(s *throttleState, req *http.Request, clock clockwork.Clock) (time.Time, bool, error) {
	counted := false
	if !th.IgnoreQuota && s.quota.until.Load() != 0 {
		reset, ok := time.Time{}, false
		if reset, ok, counted = s.quota.take(clock.Now(), req); !ok {
			return reset, false, ErrQuotaExhausted
		}
	}
	if !s.hot.Load() {
		return time.Time{}, counted, nil
	}
	if err := th.refuse(s, clock); err != nil {
		if counted {
			s.quota.refund()
		}
		return time.Time{}, false, err
	}
	return time.Time{}, counted, nil
}

// admitRetry decides whether a retry to s's destination may be sent: the
// throttle's draw alone, not the quota's pacing. A destination that has
// signalled nothing for as far back as the counts reach is admitted
// without a clock reading or a lock.
func (th *Throttle) admitRetry(s *throttleState, clock clockwork.Clock) error {
	if !s.hot.Load() {
		return nil
	}
	return th.refuse(s, clock)
}

// quotaSpent reports whether s's destination said its quota is spent at
// now, and when it resets: the quota resp names when s holds it, else
// every quota s holds. A Throttle that ignores quotas never says so.
func (th *Throttle) quotaSpent(s *throttleState, resp *http.Response, now time.Time) (time.Time, bool) {
	if th.IgnoreQuota || s.quota.until.Load() == 0 {
		return time.Time{}, false
	}
	if resp != nil {
		if rl, ok := ParseRateLimit(resp.Header, now); ok {
			if reset, spent, held := s.quota.spentNamed(rl.Name, now); held {
				return reset, spent
			}
		}
	}
	return s.quota.spent(now)
}

// takeQuota takes a request from the destination's known quota for a
// retry or a hedge about to be sent, and reports false, with the quota's
// reset, when it is spent. Without a Throttle it takes nothing.
func (op *operation) takeQuota() (time.Time, bool) {
	op.quotaCounted = false
	if op.dest == nil || op.t.Throttle.IgnoreQuota || op.dest.quota.until.Load() == 0 {
		return time.Time{}, true
	}
	reset, ok, counted := op.dest.quota.take(op.clock.Now(), op.req)
	op.quotaCounted = counted
	return reset, ok
}

// refundQuota gives back the request last taken from the quota, when it
// was counted, for an attempt that was then not sent.
func (op *operation) refundQuota() {
	if op.quotaCounted {
		op.quotaCounted = false
		op.dest.quota.refund()
	}
}

// refuse draws whether an attempt to the hot destination s is refused,
// and counts a refusal as a request. It returns ErrThrottled when
// refused.
func (th *Throttle) refuse(s *throttleState, clock clockwork.Clock) error {
	r := th.rand()
	now := clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sync(th, now)
	req, acc, n := s.w.counts()
	span := time.Duration(n) * th.window() / throttleBuckets
	// Written so that a NaN draw or probability admits.
	if !(r < rejectProbability(req, acc, th.k(), th.maxReject(), th.minRequests(span))) {
		return nil
	}
	// A refusal counts as a request: the SRE form needs it to keep
	// refusing while nothing is accepted.
	s.w.add(1, 0)
	s.lastSignal = now
	return ErrThrottled
}

// pendingFold is how many accepts a cold destination counts before they
// are folded into its window with a clock reading, so that a burst after
// a long quiet spell is not spread thin over the quiet time.
const pendingFold = 64

// record counts an attempt's result, accepted or an overload signal,
// and reads what its response says of the quota. A response below 429
// from a cold destination that the quota does not want read (see
// quotaState) is only counted, and sampled when the count is folded.
func (th *Throttle) record(s *throttleState, resp *http.Response, err error, sent time.Time, clock clockwork.Clock) {
	if err == nil && resp.StatusCode < http.StatusTooManyRequests && !s.hot.Load() && !s.quota.wants(resp) {
		if th.count(s, clock) {
			s.quota.sample(resp)
		}
		return
	}
	th.recordSlow(s, resp, err, sent, clock)
}

// count counts an accept of a cold destination, folding the pending
// accepts into its window every pendingFold; it reports whether it
// folded them.
func (th *Throttle) count(s *throttleState, clock clockwork.Clock) bool {
	n := s.pending.Add(1)
	if n == 1 && s.first.Load() == 0 {
		s.first.CompareAndSwap(0, clock.Now().UnixNano())
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
func (th *Throttle) request(s *throttleState, clock clockwork.Clock) {
	if s.hot.Load() {
		th.tally(s, clock.Now(), 1, 0, false)
	}
}

// accept counts an accepted attempt: in pending while s is cold, in the
// window while it is hot.
func (th *Throttle) accept(s *throttleState, clock clockwork.Clock) {
	if !s.hot.Load() {
		th.count(s, clock)
		return
	}
	th.tally(s, clock.Now(), 1, 1, false)
}

// tally counts req requests and acc accepts in s's window at now; an
// overload signal makes s hot from now.
func (th *Throttle) tally(s *throttleState, now time.Time, req, acc float64, signal bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if signal {
		s.hot.Store(true)
		s.lastSignal = now
	}
	s.sync(th, now)
	s.w.add(req, acc)
}

// recordSlow is record for any other result.
func (th *Throttle) recordSlow(s *throttleState, resp *http.Response, err error, sent time.Time, clock clockwork.Clock) {
	if resp != nil && !th.IgnoreQuota {
		if s.quota.wants(resp) {
			s.quota.observe(resp, clock.Now(), sent)
		} else {
			// The slow path: a hot destination's responses are all
			// sampled, as a cold one's are at each fold.
			s.quota.sample(resp)
		}
	}
	if !overloadSignal(resp, err) {
		th.accept(s, clock)
		return
	}
	th.tally(s, clock.Now(), 1, 0, true)
}

// sync moves s's window to now and folds the pending accepts into it;
// it turns s cold once the whole ring has passed since the last signal.
// s.mu must be held.
func (s *throttleState) sync(th *Throttle, now time.Time) {
	width := th.window() / throttleBuckets
	s.w.advance(now, width)
	if n := s.pending.Swap(0); n > 0 {
		s.w.spread(float64(n), foldSpan(s.lastFold, s.first.Load(), now, width), width)
	}
	s.lastFold = now
	if now.Sub(s.lastSignal) >= throttleRing*width {
		s.hot.Store(false)
	}
}

// foldSpan is the time over which accepts counted while cold are spread
// when folded at now: since the last fold; before the first fold, since
// the first accept was counted (first, in UnixNano); with neither known,
// one bucket's width, as if just now. It is never longer than the ring:
// the accepts were counted without the clock, so when that time holds a
// quiet spell they may all have come after it, and spreading them over
// the spell would leave a burst that just came in next to nothing. An
// accept is taken as no older than the counts can reach back; the most
// this can overstate is pendingFold accepts, gone from the window one
// Window later.
func foldSpan(lastFold time.Time, first int64, now time.Time, width time.Duration) time.Duration {
	var d time.Duration
	switch {
	case !lastFold.IsZero():
		d = now.Sub(lastFold)
	case first != 0:
		d = max(now.Sub(time.Unix(0, first)), width)
	default:
		d = width
	}
	return min(d, throttleRing*width)
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

// advance makes the head bucket the one holding now, clearing the buckets
// it passes.
func (w *window) advance(now time.Time, width time.Duration) {
	if w.start.IsZero() {
		w.start = now
		return
	}
	n := now.Sub(w.start) / width
	if n <= 0 {
		return
	}
	if n >= throttleRing {
		w.b = [throttleRing]bucket{}
		w.head = 0
		w.start = now
		return
	}
	for range n {
		w.head = (w.head + 1) % throttleRing
		w.b[w.head] = bucket{}
	}
	w.start = w.start.Add(n * width)
}

// add counts requests and accepts in the head bucket.
func (w *window) add(req, acc float64) {
	w.b[w.head].req += req
	w.b[w.head].acc += acc
}

// spread counts n accepted requests made evenly over the last elapsed:
// the part that falls within the window, spread over the buckets it
// covers, up to the head.
func (w *window) spread(n float64, elapsed, width time.Duration) {
	span := width * throttleBuckets
	if elapsed > span {
		n *= float64(span) / float64(elapsed)
		elapsed = span
	}
	k := min(max(int((elapsed+width-1)/width), 1), throttleBuckets)
	for i := range k {
		j := (w.head - i + throttleRing) % throttleRing
		w.b[j].req += n / float64(k)
		w.b[j].acc += n / float64(k)
	}
}

// counts returns the requests and accepts the throttle decides on, and
// how many buckets they cover: see countBack.
func (w *window) counts() (req, acc float64, n int) {
	return countBack(&w.b, w.head)
}

// bucket counts the requests and accepts of one stretch of time.
type bucket struct{ req, acc float64 }

// countBack sums the buckets of ring from head back: the newest
// throttleBuckets always, then older ones, one by one, while the sum
// holds fewer than throttleSamples requests and no accept, up to the
// whole ring or to an older bucket that holds an accept, which is left
// out: failures from before the server last accepted one say nothing of
// it now. It returns the sums and how many buckets they cover.
func countBack(ring *[throttleRing]bucket, head int) (req, acc float64, n int) {
	for n < throttleRing && (n < throttleBuckets || (req < throttleSamples && acc == 0)) {
		b := ring[(head-n+throttleRing)%throttleRing]
		if n >= throttleBuckets && b.acc > 0 {
			break
		}
		req, acc = req+b.req, acc+b.acc
		n++
	}
	return req, acc, n
}

// throttle asks the Transport's Throttle whether the operation may start,
// before its first attempt. With WaitQuota, an operation whose quota is
// spent waits for the reset when it comes within MaxRetryAfter and leaves
// MinAttemptTime before the deadline, and is then asked again, once; the
// wait ends, refused, with the operation's context or the request's
// Cancel channel.
func (op *operation) throttle() error {
	if op.t.Throttle == nil {
		return nil
	}
	return op.admitFirst(op.t.Throttle)
}

// admitFirst is throttle's work when a Throttle is set, apart so that
// throttle inlines.
func (op *operation) admitFirst(th *Throttle) error {
	op.dest = th.dest(op.req)
	if op.dest.idle() {
		return nil
	}
	if !op.timed && op.dest.quota.until.Load() != 0 {
		// An answer's quota is placed in time from when its attempt
		// was sent (see quotaUpdate): attempts read the clock.
		op.timed, op.start = true, op.clock.Now()
	}
	reset, counted, err := th.admitCounted(op.dest, op.req, op.clock)
	op.quotaCounted = counted
	if err != ErrQuotaExhausted || !th.WaitQuota {
		return err
	}
	waited, slept := op.waitForQuota(reset)
	if slept && op.t.OnWait != nil {
		// Nothing was waited before the first attempt but this: all of
		// the operation's waits so far, and all of it the server's.
		op.t.OnWait(op.req, Wait{Waited: op.waited, RetryAfter: op.waited})
	}
	if !waited {
		return err
	}
	_, op.quotaCounted, err = th.admitCounted(op.dest, op.req, op.clock)
	return err
}

// waitForQuota waits, with WaitQuota, until a spent quota resets at
// reset, when mayWaitFor allows it. It reports whether it waited until
// the reset (false when it did not wait, or the wait ended with the
// operation's context or the request's Cancel channel), and whether it
// slept at all; the time slept, cut short or not, is the operation's.
func (op *operation) waitForQuota(reset time.Time) (waited, slept bool) {
	now := op.clock.Now()
	if !op.t.Throttle.WaitQuota || !op.mayWaitFor(reset, now) {
		return false, false
	}
	timer := op.clock.NewTimer(reset.Sub(now))
	defer timer.Stop()
	select {
	case <-timer.Chan():
		waited = true
	case <-op.ctx.Done():
	case <-op.cancelChan():
	}
	op.waited += op.clock.Since(now)
	return waited, true
}

// takeQuotaForRetry takes a request from the quota for a retry about to
// be sent; with WaitQuota, a quota spent while the retry waited is waited
// for once more, until its reset, when that fits.
func (op *operation) takeQuotaForRetry() bool {
	reset, ok := op.takeQuota()
	if ok {
		return true
	}
	if waited, _ := op.waitForQuota(reset); !waited {
		return false
	}
	_, ok = op.takeQuota()
	return ok
}

// recordAttempt tells the Throttle how the attempt that just ended went.
func (op *operation) recordAttempt(resp *http.Response, err error) {
	if op.dest != nil {
		op.recordAt(resp, err, op.lastStart)
	}
}

// recordAt is recordAttempt's work when a Throttle is set, apart so that
// recordAttempt inlines.
func (op *operation) recordAt(resp *http.Response, err error, sent time.Time) {
	if resp == nil {
		op.dest.quota.unanswered()
	}
	if err != nil && (op.callerEnded() || errors.Is(err, ErrThrottled)) {
		// The caller left, or a layer below refused the attempt
		// locally: the server said nothing.
		return
	}
	op.t.Throttle.record(op.dest, resp, err, sent, op.clock)
}

// recordLoser tells the Throttle how a hedged attempt that lost went,
// given whether the answer it lost to signalled overload. A loser the
// operation canceled was sent, so it counts as a request; it counts as
// an accept only when the winner's answer was one: counted as a request
// alone, the hedges of a healthy destination would look like refusals
// and keep it refused, and counted as an accept beside a winner that
// signalled overload, it would hide an outage. A loser that had its
// answer first counts as any attempt does.
func (op *operation) recordLoser(a *attempt, lostToSignal bool) {
	if op.dest == nil {
		return
	}
	if a.resp != nil || !errors.Is(a.err, context.Canceled) || op.callerEnded() {
		op.recordAt(a.resp, a.err, a.lastStart)
		return
	}
	op.dest.quota.unanswered()
	switch {
	case a.unsent:
	case lostToSignal:
		op.t.Throttle.request(op.dest, op.clock)
	default:
		op.t.Throttle.accept(op.dest, op.clock)
	}
}
