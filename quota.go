package httpretry

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrQuotaExhausted matches (with [errors.Is]) the error of an operation
// that a [Throttle] refused because its destination said its quota was
// spent (see [ParseRateLimit]) and the quota has not reset yet. It also
// matches [ErrThrottled]: the operation stops with [Throttled].
var ErrQuotaExhausted error = quotaExhaustedError{}

type quotaExhaustedError struct{}

func (quotaExhaustedError) Error() string {
	return "httpretry: refused locally: the destination's rate-limit quota is spent"
}

// Is makes ErrQuotaExhausted match ErrThrottled.
func (quotaExhaustedError) Is(target error) bool { return target == ErrThrottled }

// maxQuotaNames is how many named quotas a destination keeps; a further
// name takes the place of the one that resets first.
const maxQuotaNames = 4

// quotaState is what a destination last said of its quotas, one slot per
// quota name (X-RateLimit-Resource, or a RateLimit policy's name; "" for
// an unnamed quota). A destination's first response is read; after that,
// every response while the last one read carried rate-limit headers, and
// every 429: a destination that sends none costs nothing per request.
//
// With one quota held, each operation admitted takes one from its count.
// With several, a request's quota is not known before its response names
// it: an operation is refused only when every quota held is spent, and
// takes from none.
type quotaState struct {
	read  atomic.Bool  // read the next response's headers
	until atomic.Int64 // nonzero while a quota may be held: the latest reset set, in Unix nanoseconds

	mu    sync.Mutex // protects the slots' names, their assignment and renewal
	slots [maxQuotaNames]quotaSlot
}

// quotaSlot is one quota of a destination.
type quotaSlot struct {
	name     string       // protected by quotaState.mu
	until    atomic.Int64 // when the window resets, in Unix nanoseconds; 0 when none is held
	left     atomic.Int64 // requests the window admits before until
	limit    atomic.Int64 // requests a window admits, announced or the most seen; 0 when not known
	period   atomic.Int64 // a window's length in nanoseconds, announced or the longest reset seen; 0 when not known
	inflight atomic.Int64 // operations admitted from left whose response has not been read
}

// quotaSame is how far apart two announced resets may be and still name
// the same window: the server counts whole seconds.
const quotaSame = time.Second

// admit takes one request from the known quota. It returns the reset
// time and false when the quota is spent.
func (q *quotaState) admit(now time.Time) (time.Time, bool) {
	reset, ok, _ := q.check(now, true)
	return reset, ok
}

// take is admit for an attempt about to be sent, reporting too whether a
// request was counted, to be given back if the attempt is then not sent
// (see refund).
func (q *quotaState) take(now time.Time) (reset time.Time, ok, counted bool) {
	return q.check(now, true)
}

// spent reports whether the known quota is spent at now, and its reset,
// without taking a request from it.
func (q *quotaState) spent(now time.Time) (time.Time, bool) {
	reset, ok, _ := q.check(now, false)
	return reset, !ok
}

// spentNamed reports whether the quota named name is spent at now, and
// its reset; held is false when no such quota is held.
func (q *quotaState) spentNamed(name string, now time.Time) (reset time.Time, spent, held bool) {
	q.mu.Lock()
	var s *quotaSlot
	for i := range q.slots {
		if q.slots[i].name == name && q.slots[i].until.Load() != 0 {
			s = &q.slots[i]
		}
	}
	q.mu.Unlock()
	if s == nil {
		return time.Time{}, false, false
	}
	until, ok := q.current(s, now)
	if !ok {
		return time.Time{}, false, false
	}
	return until, s.left.Load() <= 0, true
}

// refund gives back a request counted for an attempt that was then not
// sent.
func (q *quotaState) refund() {
	if s := q.single(); s != nil {
		s.left.Add(1)
		decrementIfPositive(&s.inflight)
	}
}

// unanswered ends the count of a request in flight that got no response
// (observe ends those that did), so that later responses are taken at
// their word again.
func (q *quotaState) unanswered() {
	if s := q.single(); s != nil {
		decrementIfPositive(&s.inflight)
	}
}

// single returns the one quota held, nil when none or several are: only
// a single quota counts requests in flight (see check).
func (q *quotaState) single() *quotaSlot {
	var held *quotaSlot
	for i := range q.slots {
		if q.slots[i].until.Load() != 0 {
			if held != nil {
				return nil
			}
			held = &q.slots[i]
		}
	}
	return held
}

// check is admit, which takes a request when take is set, and spent; it
// reports whether a request was counted.
func (q *quotaState) check(now time.Time, take bool) (time.Time, bool, bool) {
	u := q.until.Load()
	if u == 0 {
		return time.Time{}, true, false
	}
	var (
		held  *quotaSlot
		n     int
		open  bool      // some quota held has requests left
		reset time.Time // the earliest reset of a spent one
	)
	for i := range q.slots {
		s := &q.slots[i]
		until, ok := q.current(s, now)
		if !ok {
			continue
		}
		n, held = n+1, s
		if s.left.Load() > 0 {
			open = true
		} else if reset.IsZero() || until.Before(reset) {
			reset = until
		}
	}
	switch {
	case n == 0:
		// Every window has reset with nothing to renew: admit until a
		// response says more.
		q.until.CompareAndSwap(u, 0)
		return time.Time{}, true, false
	case n == 1 && take:
		return held.take(now)
	case open:
		return time.Time{}, true, false
	}
	return reset, false, false
}

// current returns the reset of s's window at now, and whether s holds a
// quota. A window that has reset is renewed with the quota's limit when
// both the limit and the window's length are known and the destination
// still sends rate-limit headers, so that the callers waiting for the
// reset are admitted up to the quota, not all at once before any
// response says what the new window holds.
func (q *quotaState) current(s *quotaSlot, now time.Time) (time.Time, bool) {
	u := s.until.Load()
	if u == 0 {
		return time.Time{}, false
	}
	if now.UnixNano() < u {
		return time.Unix(0, u), true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if s.until.Load() != u { // renewed or replaced meanwhile
		u = s.until.Load()
		return time.Unix(0, u), u != 0
	}
	limit, period := s.limit.Load(), s.period.Load()
	if !q.read.Load() || limit <= 0 || period <= 0 {
		s.until.Store(0)
		return time.Time{}, false
	}
	next := renewedReset(u, now.UnixNano(), period)
	// left before until: whoever sees the new window sees its count.
	s.left.Store(limit)
	s.inflight.Store(0)
	s.until.Store(next)
	storeMax(&q.until, next)
	return time.Unix(0, next), true
}

// renewedReset returns the reset of the window holding now, for windows
// of period that follow one ending at until ≤ now.
func renewedReset(until, now, period int64) int64 {
	return until + period*(1+(now-until)/period)
}

// take takes one request from s's window, ending at until.
func (s *quotaSlot) take(now time.Time) (reset time.Time, ok, counted bool) {
	until := time.Unix(0, s.until.Load())
	if !now.Before(until) {
		return time.Time{}, true, false // reset meanwhile
	}
	if s.left.Add(-1) < 0 {
		s.left.Add(1)
		return until, false, false
	}
	s.inflight.Add(1)
	return until, true, true
}

// storeMax stores v in a unless a holds more.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// wants reports whether resp's headers should be read for the quota.
func (q *quotaState) wants(resp *http.Response) bool {
	return q.read.Load() || resp.StatusCode == http.StatusTooManyRequests
}

// observe reads what resp says of the quota.
func (q *quotaState) observe(resp *http.Response, now time.Time) {
	rl, ok := ParseRateLimit(resp.Header, now)
	if q.read.Load() != ok {
		q.read.Store(ok)
	}
	var ra time.Duration
	hasRA := false
	if resp.StatusCode == http.StatusTooManyRequests {
		ra, hasRA = ParseRetryAfter(resp.Header, now)
	}
	a, ok := quotaAnnounced(rl, ok, resp.StatusCode, ra, hasRA)
	if !ok {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.slot(a.rl.Name)
	inflight := decrementIfPositive(&s.inflight)
	until, left := quotaUpdate(a.rl, a.spent, s.until.Load(), s.left.Load(), inflight, now)
	if a.paced {
		// A window's count says how large the quota is and how long
		// its window lasts, when the headers do not.
		s.limit.Store(limitOf(a.rl, s.limit.Load()))
		s.period.Store(periodOf(a.rl, s.period.Load()))
	}
	s.left.Store(left)
	s.until.Store(until)
	storeMax(&q.until, until)
}

// slot returns the slot of the quota named name: its own, a free one, or
// the one that resets first. q.mu must be held.
func (q *quotaState) slot(name string) *quotaSlot {
	var free, first *quotaSlot
	for i := range q.slots {
		s := &q.slots[i]
		u := s.until.Load()
		switch {
		case s.name == name && u != 0:
			return s
		case u == 0 && (free == nil || s.name == name):
			free = s
		case u != 0 && (first == nil || u < first.until.Load()):
			first = s
		}
	}
	if free == nil {
		free = first
	}
	if free.name != name {
		free.name = strings.Clone(name) // not the header's memory
		free.limit.Store(0)
		free.period.Store(0)
		free.inflight.Store(0)
	}
	return free
}

// decrementIfPositive takes one from a unless it is 0, and returns what
// is left: a response read for an operation that did not take from the
// count (a retry, or one admitted before the quota was known) does not
// take it below 0.
func decrementIfPositive(a *atomic.Int64) int64 {
	for {
		n := a.Load()
		if n <= 0 || a.CompareAndSwap(n, n-1) {
			return max(n-1, 0)
		}
	}
}

// announcement is what a response says of a quota, for quotaUpdate.
type announcement struct {
	rl    RateLimit
	spent bool // nothing is left until rl.Reset, whatever rl.Remaining says
	paced bool // rl.Reset is the quota window's, not a Retry-After pause
}

// quotaAnnounced decides what a response says of its quota, given its
// rate-limit headers (rl, when ok), its status and, on a 429, its
// Retry-After (ra, when hasRA). A response below 429 announces a quota
// when its headers give a reset. A 429 spends the quota: until the
// headers' reset when they say none remains, else for the Retry-After
// the server asked (a 429 with quota left, or with a reset that cannot
// be read, is a pause, not the quota's end), else until the headers'
// reset; with neither, nothing is kept.
func quotaAnnounced(rl RateLimit, ok bool, status int, ra time.Duration, hasRA bool) (announcement, bool) {
	if status != http.StatusTooManyRequests {
		return announcement{rl: rl, paced: true}, ok && rl.HasReset
	}
	switch {
	case ok && rl.Remaining == 0 && rl.HasReset:
		return announcement{rl: rl, spent: true, paced: true}, true
	case hasRA:
		rl.Reset, rl.HasReset = min(ra, maxRateLimitReset), true
		return announcement{rl: rl, spent: true}, true
	case ok && rl.HasReset:
		return announcement{rl: rl, spent: true, paced: true}, true
	}
	return announcement{}, false
}

// quotaUpdate decides the quota to keep after a response announced rl,
// given the one known (until, left; until 0 for none) and the operations
// still in flight that took from it: within the same window, the server's
// count is the truth when nothing is in flight, and otherwise the
// smaller of it and the local count holds, since requests admitted after
// the server counted are still on their way; a new window takes the
// server's count; spent, nothing is left.
func quotaUpdate(rl RateLimit, spent bool, until, left, inflight int64, now time.Time) (newUntil, newLeft int64) {
	remaining := rl.Remaining
	if spent {
		remaining = 0
	}
	next := now.Add(rl.Reset).UnixNano()
	// A later reset with more left at the server than here and in
	// flight: the server's window is a newer one than the one held,
	// however close their resets, which resets in whole seconds cannot
	// tell apart for windows of a second or two.
	newer := next > until && remaining > max(left, 0)+inflight
	if until == 0 || absDuration(time.Duration(next-until)) > quotaSame || newer {
		return next, remaining
	}
	if inflight > 0 {
		return until, min(left, remaining)
	}
	return until, remaining
}

// limitOf returns a quota's size: the announced limit, else the most a
// window was seen to hold, a response's remaining count and the request
// it answered.
func limitOf(rl RateLimit, known int64) int64 {
	if rl.Limit > 0 {
		return rl.Limit
	}
	return max(known, min(rl.Remaining, maxSFInteger-1)+1)
}

// periodOf returns a quota window's length in nanoseconds: the announced
// window, else the longest reset seen.
func periodOf(rl RateLimit, known int64) int64 {
	if rl.Window > 0 {
		return int64(rl.Window)
	}
	return max(known, int64(rl.Reset))
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
