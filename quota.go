package httpretry

import (
	"net/http"
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

// quotaState is what a destination last said of its quota. A
// destination's first response is read; after that, every response while
// the last one read carried rate-limit headers, and every 429: a
// destination that sends none costs nothing per request.
type quotaState struct {
	read  atomic.Bool  // read the next response's headers
	until atomic.Int64 // when the known quota resets, in Unix nanoseconds; 0 when none is known
	left  atomic.Int64 // requests the quota admits before until
}

// quotaSame is how far apart two announced resets may be and still name
// the same window: the server counts whole seconds.
const quotaSame = time.Second

// admit takes one request from the known quota. It returns the reset
// time and false when the quota is spent.
func (q *quotaState) admit(now time.Time) (time.Time, bool) {
	u := q.until.Load()
	if u == 0 {
		return time.Time{}, true
	}
	until := time.Unix(0, u)
	if !now.Before(until) {
		// The window has reset: admit until a response says more.
		q.until.CompareAndSwap(u, 0)
		return time.Time{}, true
	}
	if q.left.Add(-1) < 0 {
		q.left.Add(1)
		return until, false
	}
	return until, true
}

// wants reports whether resp's headers should be read for the quota.
func (q *quotaState) wants(resp *http.Response) bool {
	return q.read.Load() || resp.StatusCode == http.StatusTooManyRequests
}

// observe reads what resp says of the quota. A 429 without rate-limit
// headers but with a valid Retry-After says the quota is spent until
// then.
func (q *quotaState) observe(resp *http.Response, now time.Time) {
	rl, ok := ParseRateLimit(resp.Header, now)
	if q.read.Load() != ok {
		q.read.Store(ok)
	}
	if !ok {
		if resp.StatusCode != http.StatusTooManyRequests {
			return
		}
		d, ok := ParseRetryAfter(resp.Header, now)
		if !ok {
			return
		}
		rl = RateLimit{Remaining: 0, Reset: min(d, maxRateLimitReset), HasReset: true}
	}
	q.set(quotaUpdate(rl, resp.StatusCode, q.until.Load(), q.left.Load(), now))
}

// set stores the quota quotaUpdate decided.
func (q *quotaState) set(until, left int64, ok bool) {
	if !ok {
		return
	}
	q.left.Store(left)
	q.until.Store(until)
}

// quotaUpdate decides the quota to keep after a response announced rl,
// given the one known (until, left; until 0 for none): a quota without
// a reset is not kept, since without a window it cannot be paced; a 429
// spends it whatever it says; within the same window the smaller of the
// server's count and the local one holds, since requests admitted after
// the server counted are still on their way; a new window takes the
// server's count. ok is false when nothing is to be kept.
func quotaUpdate(rl RateLimit, status int, until, left int64, now time.Time) (newUntil, newLeft int64, ok bool) {
	if !rl.HasReset {
		return 0, 0, false
	}
	if status == http.StatusTooManyRequests {
		rl.Remaining = 0
	}
	next := now.Add(rl.Reset).UnixNano()
	if until != 0 && absDuration(time.Duration(next-until)) <= quotaSame {
		return until, min(left, rl.Remaining), true
	}
	return next, rl.Remaining, true
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
