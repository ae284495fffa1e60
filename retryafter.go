package httpretry

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/httpretry/httpretry/internal/serverdelay"
)

// maxDuration is the largest time.Duration. A Retry-After too large to
// represent saturates to it, so that it stops the operation with
// [RetryAfterTooLong] instead of overflowing into a short or negative wait.
const maxDuration = time.Duration(math.MaxInt64)

// ParseRetryAfter returns the delay a response's headers ask for before
// another attempt, and whether they held a valid value.
//
// A valid Retry-After-Ms (OpenAI's and Anthropic's APIs) comes first, then
// X-Amz-Retry-After (AWS), both in milliseconds, fractions allowed, then
// Retry-After (RFC 9110 §10.2.3): seconds, a fraction allowed, or an
// HTTP-date, taken against the response's Date header when valid, else
// against now (the time the response arrived; it reads no clock). A date in
// the past gives (0, true); a malformed or negative value (0, false); a
// value too large for a Duration saturates.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	for _, name := range msDelayHeaders {
		if d, ok := parseRetryAfterMs(h[name]); ok {
			return d, true
		}
	}
	v := strings.Trim(h.Get(serverdelay.RetryAfter), " \t")
	if v == "" {
		return 0, false
	}
	if d, ok := parseDelaySeconds(v); ok {
		return d, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	// at and now are both wall-clock instants here; the difference is
	// scheduled later on the local monotonic clock. Sub saturates at the
	// Duration bounds, so a date centuries away cannot overflow.
	return max(at.Sub(now), 0), true
}

// msDelayHeaders are the millisecond forms of Retry-After, in the order
// ParseRetryAfter reads them, before Retry-After: the one list of them,
// which the idempotency middleware reads too.
var msDelayHeaders = serverdelay.Millisecond

// parseRetryAfterMs parses the first value of a millisecond header:
// 1*DIGIT ["." *DIGIT], or "." 1*DIGIT, in milliseconds. Digits beyond
// the nanosecond are dropped. A value that does not fit in a Duration is
// invalid, not saturated: it is a malformed hint, and the next header may
// still hold a usable one.
func parseRetryAfterMs(vs []string) (time.Duration, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	v := strings.Trim(vs[0], " \t")
	const limit = int64(maxDuration / time.Millisecond)
	var ms, frac, scale int64 = 0, 0, int64(time.Millisecond)
	digits, dot := false, false // any digit seen; the dot seen
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			return 0, false
		}
		digits = true
		if !dot {
			// Past limit the value is invalid whatever follows; holding
			// it at limit+1 keeps ms·10 far from overflow.
			ms = min(ms*10+int64(c-'0'), limit+1)
		} else if scale >= 10 {
			scale /= 10
			frac += int64(c-'0') * scale
		}
	}
	if !digits || ms > limit {
		return 0, false
	}
	d := time.Duration(ms) * time.Millisecond
	if d > maxDuration-time.Duration(frac) {
		return 0, false
	}
	return d + time.Duration(frac), true
}

// parseDelaySeconds parses delay-seconds (1*DIGIT), saturating at
// maxDuration, and a decimal fraction after it ("2.0", as Shopify sends
// it), digits past the nanosecond dropped. A sign or any other byte
// makes it invalid.
func parseDelaySeconds(v string) (time.Duration, bool) {
	whole, frac, hasFrac := strings.Cut(v, ".")
	if whole == "" {
		return 0, false
	}
	const limit = int64(maxDuration / time.Second)
	var secs int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		// Past limit the value saturates; holding it at limit+1 keeps
		// secs·10 far from overflow while the rest is validated.
		secs = min(secs*10+int64(c-'0'), limit+1)
	}
	var ns int64
	scale := int64(time.Second)
	for i := 0; hasFrac && i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if scale >= 10 {
			scale /= 10
			ns += int64(c-'0') * scale
		}
	}
	if secs > limit || time.Duration(secs)*time.Second > maxDuration-time.Duration(ns) {
		return maxDuration, true
	}
	return time.Duration(secs)*time.Second + time.Duration(ns), true
}

// honoursRetryAfter reports whether a response's status is one whose
// Retry-After the Transport honours: 429 and 503 (RFC 9110 §10.2.3,
// RFC 6585 §4), 529 (an overloaded API, treated as 503), and 409, which an
// idempotency layer answers while the first request with the same key is
// still running.
func honoursRetryAfter(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable,
		statusOverloaded, http.StatusConflict:
		return true
	}
	return false
}

// serverDelay returns the server's requested delay on a response whose
// status honours it.
func serverDelay(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil || !honoursRetryAfter(resp.StatusCode) {
		return 0, false
	}
	return ParseRetryAfter(resp.Header, now)
}
