package throttle

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
)

// This file holds what a caller of the Throttle, such as httpretry's
// Transport, calls around its attempts: Dest before the first, Admit,
// AdmitRetry and TakeQuota before each, Record after each. They pass data
// (a request, a time, a Result), never the caller's own state.

// Clock tells the time; clockwork.Clock satisfies it. A nil Clock is the
// system clock.
type Clock interface{ Now() time.Time }

// systemClock is the Clock a nil Clock stands for.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// orSystem returns c, or the system clock when c is nil.
func orSystem(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}

// Dest returns the state of req's destination, as Key names it, and of
// req's credential there. A destination's overload counts are one for
// all its requests; its quota is kept per credential, since a quota is
// usually a token's (GitHub's 5,000 an hour per token): a request
// carrying an Authorization or an X-Api-Key header draws from the quota
// of that credential, known by a keyed hash of the headers' values
// (never the values themselves, see credentialKey), and one carrying
// neither from the destination's own. At most [MaxCredentials]
// credentials are kept per destination; past it one not used lately is
// forgotten. A new destination's or credential's state holds no counts
// and no quota, and its first responses are read for a quota. The state
// stays valid after the destination is evicted (see MaxKeys); it is then
// no longer shared with later operations.
func (th *Throttle) Dest(req *http.Request) *Dest {
	if th.Shared != nil {
		return th.sharedDest(req).credential(req)
	}
	if th.Key == nil {
		if d := th.dests.LastHost(req); d != nil {
			return d.credential(req)
		}
	}
	th.dests.PinBy(&destPinned)
	if th.Key == nil {
		return th.dests.GetHost(req, th.MaxKeys, newDest).credential(req)
	}
	return th.dests.Get(th.Key(req), th.MaxKeys, newDest).credential(req)
}

// MaxCredentials is how many credentials' quotas a destination keeps.
const MaxCredentials = 64

// newDest makes a destination's state, with counts of its own.
func newDest(d *Dest) { d.counts = &counts{} }

// credential returns the state of req's credential at d: d itself for a
// request without one.
func (d *Dest) credential(req *http.Request) *Dest {
	if len(req.Header) == 0 {
		return d // a request's header as http.NewRequest makes it
	}
	return d.credentialOf(req)
}

// credentialOf is credential for a request with a header.
func (d *Dest) credentialOf(req *http.Request) *Dest {
	key, ok := credentialKey(req.Header)
	if !ok {
		return d
	}
	d.creds.PinBy(&destPinned)
	return d.creds.Get(key, MaxCredentials, func(c *Dest) { c.counts, c.host = d.counts, d })
}

// credentialSeed keys the hash that names credentials: random per
// process, so that a name says nothing of the secret it was made from.
var credentialSeed = maphash.MakeSeed()

// credentialKey names the credential h carries: a keyed 64-bit hash
// (hash/maphash) of its Authorization and X-Api-Key values, in hex;
// false when it carries neither. The name never holds the secret, and
// is not kept beyond the process.
func credentialKey(h http.Header) (string, bool) {
	if len(h) == 0 {
		return "", false // a request's header as http.NewRequest makes it
	}
	auth, apiKey := h["Authorization"], h["X-Api-Key"]
	if len(auth) == 0 && len(apiKey) == 0 {
		return "", false
	}
	var m maphash.Hash
	m.SetSeed(credentialSeed)
	for _, v := range auth {
		m.WriteString(v)
		m.WriteByte(0)
	}
	m.WriteByte(1)
	for _, v := range apiKey {
		m.WriteString(v)
		m.WriteByte(0)
	}
	return strconv.FormatUint(m.Sum64(), 16), true
}

// sharedDest is the destination's state with a Shared: the state also
// remembers its key.
func (th *Throttle) sharedDest(req *http.Request) *Dest {
	key := desttable.HostKey(req)
	if th.Key != nil {
		key = desttable.BoundKey(th.Key(req))
	}
	th.dests.PinBy(&destPinned)
	d := th.dests.Get(key, th.MaxKeys, newDest)
	d.link(key, th.Shared)
	return d
}

// Idle reports whether d's destination has no known quota and has
// signalled nothing for as far back as the counts reach, here and, with
// a [Shared], in the fleet: Admit then admits without a clock reading or
// a lock.
func (d *Dest) Idle() bool {
	return d.quota.until.Load() == 0 && !d.hot.Load() && !d.fleetHot()
}

// QuotaKnown reports whether d's destination announced a quota that may
// still hold. An answer's quota is placed in time from when its attempt
// was sent: while one is known, a caller reads the clock when it sends an
// attempt, for [Result.Sent].
func (d *Dest) QuotaKnown() bool { return d.quota.until.Load() != 0 }

// Ticket is what an attempt took from its destination's quota (a
// request, and during a release its turn), to be given back with Refund
// when the attempt is then not sent. The zero Ticket took nothing.
// Refund one Ticket once: its copies would each give the request back.
type Ticket struct {
	q  *quotaState
	tk taken
}

// Refund gives back what t took, once: later calls do nothing. A turn of
// a release that has ended since is not given back to the next.
func (t *Ticket) Refund() {
	if t.q != nil {
		t.q.refund(t.tk)
		t.q = nil
	}
}

// Admit decides whether an operation to d's destination may start,
// before its first attempt. It returns [ErrQuotaExhausted], with the time
// the quota resets, when the destination said its quota is spent;
// [ErrThrottled] when the throttle draws a refusal; nil, and the request
// taken from the quota, when the operation may start. req, when not nil,
// is the operation's request: with several groups of quotas held, its
// route may say which one it draws from. An idle destination (see
// [Dest.Idle]) is admitted without a clock reading or a lock.
func (th *Throttle) Admit(d *Dest, req *http.Request, clock Clock) (Ticket, time.Time, error) {
	if d.Idle() {
		return Ticket{}, time.Time{}, nil
	}
	clock = orSystem(clock)
	var t Ticket
	if !th.IgnoreQuota && d.quota.until.Load() != 0 {
		now := clock.Now()
		reset, ok, tk := d.quota.take(now, req)
		d.refusing(!ok, now)
		if !ok {
			return Ticket{}, reset, ErrQuotaExhausted
		}
		if tk != (taken{}) {
			t = Ticket{q: &d.quota, tk: tk}
		}
	}
	if !th.hotFor(d) {
		return t, time.Time{}, nil
	}
	if err := th.refuse(d, clock); err != nil {
		t.Refund()
		return Ticket{}, time.Time{}, err
	}
	return t, time.Time{}, nil
}

// AdmitRetry decides whether a retry or a hedge to d's destination may
// be sent: the throttle's draw alone, not the quota's pacing (see
// QuotaSpent and TakeQuota). It returns [ErrThrottled] when refused. A
// destination that has signalled nothing for as far back as the counts
// reach is admitted without a clock reading or a lock.
func (th *Throttle) AdmitRetry(d *Dest, clock Clock) error {
	if !th.hotFor(d) {
		return nil
	}
	return th.refuse(d, orSystem(clock))
}

// QuotaSpent reports whether d's destination said its quota is spent at
// now, and when it resets: the quota named by h, the header of the answer
// a retry would follow, when d holds it (the retry, the same request,
// draws from it too), else every quota d holds. A Throttle that ignores
// quotas never says so.
func (th *Throttle) QuotaSpent(d *Dest, h http.Header, now time.Time) (time.Time, bool) {
	if th.IgnoreQuota || d.quota.until.Load() == 0 {
		return time.Time{}, false
	}
	if h != nil {
		if rl, ok := ParseRateLimit(h, now); ok {
			if reset, spent, held := d.quota.spentNamed(rl.Name, now); held {
				return reset, spent
			}
		}
	}
	return d.quota.spent(now)
}

// TakeQuota takes a request from d's known quota for a retry or a hedge
// of req about to be sent, and reports false, with the quota's reset,
// when it is spent. Without a known quota it takes nothing and reads no
// clock.
func (th *Throttle) TakeQuota(d *Dest, req *http.Request, clock Clock) (Ticket, time.Time, bool) {
	if th.IgnoreQuota || d.quota.until.Load() == 0 {
		return Ticket{}, time.Time{}, true
	}
	now := orSystem(clock).Now()
	reset, ok, tk := d.quota.take(now, req)
	d.refusing(!ok, now)
	if tk != (taken{}) {
		return Ticket{q: &d.quota, tk: tk}, reset, ok
	}
	return Ticket{}, reset, ok
}

// QuotaReleased returns, while the operations held for d's ended pause
// are let go one at a time, a channel closed when the next may ask
// again: at the next answer, or when an attempt ends without one. It
// returns nil when the caller may ask again at once: no release is under
// way, or a turn is free (one given back since the caller was refused). An operation refused with [ErrQuotaExhausted]
// and a reset already past waits for it before asking again; see
// WaitQuota.
func (th *Throttle) QuotaReleased(d *Dest) <-chan struct{} {
	return d.quota.releaseWait()
}

// Result is how an attempt went, for Record. The caller decides what
// counts as overload (httpretry: a 429, 503 or 529; a proxy's 502 or 504;
// an error response with Envoy's x-envoy-overloaded or
// x-envoy-ratelimited; a 5xx saying
// "X-Should-Retry: false"; an attempt timeout, or a caller's deadline
// that expired while the server was silent after MinAttemptTime; a
// refused connection) and reads a 429's Retry-After, so that the
// throttle depends on neither.
type Result struct {
	// Status is the response's status code; 0 when the attempt got no
	// response.
	Status int
	// Header is the response's header, read for the quota; nil without
	// a response.
	Header http.Header
	// Request is the request the attempt sent: with several groups of
	// quotas held, the route of an answer that names one is remembered.
	Request *http.Request
	// RetryAfter is the delay a 429's or a 403's Retry-After asked for,
	// when HasRetryAfter: the pause a 429 without rate-limit fields, or a
	// 403 naming no quota (a secondary rate limit), sets.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Sent is when the attempt was sent; the zero time when the caller
	// did not read the clock (no quota was known then: see
	// [Dest.QuotaKnown]).
	Sent time.Time
	// Overload says the answer signalled overload: the attempt counts as
	// a request not accepted, and makes the destination hot.
	Overload bool
	// Unheard says the server said nothing of the attempt: the caller
	// left, a layer below refused it locally, or it was never sent. It
	// counts for neither requests nor accepts.
	Unheard bool
	// Canceled says the attempt was sent and then canceled because
	// another attempt's answer ended the operation; Overload then says
	// whether that answer signalled overload. It counts as a request
	// alone on a hot destination when the answer signalled overload
	// (counted as an accept, it would hide an outage), else as an accept
	// (counted as a request alone, the hedges of a healthy destination
	// would look like refusals and keep it refused).
	Canceled bool
}

// pendingFold is how many accepts a cold destination counts before they
// are folded into its window with a clock reading, so that a burst after
// a long quiet spell is not spread thin over the quiet time.
const pendingFold = 64

// Record counts an attempt's result, accepted or an overload signal,
// and reads what its response says of the quota. A response that
// signalled no overload, from a cold destination whose quota does not
// want it read (a destination that sent no rate-limit fields for a
// while), is only counted, without a clock reading but every
// pendingFold, and sampled when the count is folded. Record only reads
// r: it is a pointer because the success path is a few atomic operations,
// and a Result copied as an argument right after it was built costs more
// than they do.
func (th *Throttle) Record(d *Dest, r *Result, clock Clock) {
	clock = orSystem(clock)
	if r.Status == 0 {
		// Its count in flight ends: later answers are taken at their
		// word again. During a release, the next operation held goes
		// in its place.
		d.quota.unanswered()
		d.quota.released(false)
	}
	if r.Unheard {
		return
	}
	if r.Canceled && r.Overload {
		th.request(d, clock)
		return
	}
	if r.Canceled {
		th.accept(d, clock)
		return
	}
	if r.Status != 0 && !r.Overload && !r.HasRetryAfter && th.Served(d, r.Status, r.Header, clock) {
		return
	}
	th.recordSlow(d, r, clock)
}

// Served is Record's success path: it counts an answer of status, with
// header h, that signalled no overload and asked for no pause, when
// that is all Record would do with it (d is cold, and its quota does not
// want the answer read), and reports whether it did. Otherwise it does
// nothing and reports false: the caller then records the answer. A
// caller that knows an answer is served (a 2xx, say) may ask Served
// first and build a Result only when it refuses.
func (th *Throttle) Served(d *Dest, status int, h http.Header, clock Clock) bool {
	if d.hot.Load() || d.fleetHot() || d.quota.wants(status) { // hotFor, inlined by hand
		return false
	}
	if n := d.countPending(); n != 0 && th.countEdge(d, n, orSystem(clock)) {
		d.quota.sample(h)
	}
	return true
}

// recordSlow is Record for any other result.
func (th *Throttle) recordSlow(d *Dest, r *Result, clock Clock) {
	if r.Status != 0 && !th.IgnoreQuota {
		if d.quota.wants(r.Status) || r.HasRetryAfter {
			now := clock.Now()
			d.quota.observe(r, now)
			_, spent := d.quota.spent(now)
			d.refusing(spent, now)
		} else {
			// The slow path: a hot destination's responses are all
			// sampled, as a cold one's are at each fold.
			d.quota.sample(r.Header)
		}
	}
	if !r.Overload {
		th.accept(d, clock)
		return
	}
	th.tally(d, clock.Now(), 1, 0, true)
}

// counts returns the requests and accepts counted for the destination
// key names (as Key names it, or a host in its canonical spelling) over
// the span the throttle decides on, as of the last decision or fold: a
// destination that signalled nothing lately counts its accepts apart and
// folds them in every 64. It returns zeros for a destination not held.
// Tests reach it through throttleseam.Counts.
func (th *Throttle) counts(key string) (requests, accepts float64) {
	d := th.dests.Find(key)
	if d == nil {
		return 0, 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	requests, accepts, _ = d.w.counts()
	return requests, accepts
}
