package httpretry

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// maxDuration is the largest time.Duration. A Retry-After too large to
// represent saturates to it, so that it stops the operation with
// [RetryAfterTooLong] instead of overflowing into a short or negative wait.
const maxDuration = time.Duration(math.MaxInt64)

// ParseRetryAfter returns the delay a response's Retry-After header asks
// for (RFC 9110 §10.2.3), and whether the header held a valid value.
//
// The value is either delay-seconds, one or more ASCII digits, or an
// HTTP-date in any of the three formats [http.ParseTime] accepts. A date is
// converted to a delay against the response's own Date header when that is
// valid, so that a server whose clock is skewed from ours still gets the
// delay it meant; otherwise against now. A date in the past gives (0, true).
//
// A missing, empty, negative, fractional or otherwise malformed value gives
// (0, false): it does not authorize an immediate retry, and the caller's
// local backoff applies. A valid value too large for a [time.Duration]
// saturates at the largest Duration rather than overflowing.
//
// ParseRetryAfter reads no clock: now is the time the response arrived.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.Trim(h.Get("Retry-After"), " \t")
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
	d := at.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

// parseDelaySeconds parses delay-seconds (1*DIGIT), saturating at
// maxDuration. A sign, a fraction or any other byte makes it invalid.
func parseDelaySeconds(v string) (time.Duration, bool) {
	const limit = int64(maxDuration / time.Second)
	var secs int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if secs > (limit-int64(c-'0'))/10 {
			// Keep validating the remaining bytes, but the value no longer
			// fits: it saturates.
			secs = limit + 1
			continue
		}
		secs = secs*10 + int64(c-'0')
	}
	if secs > limit {
		return maxDuration, true
	}
	return time.Duration(secs) * time.Second, true
}

// retryAfter returns the server's requested delay on a 429 or 503.
func (op *operation) retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	return ParseRetryAfter(resp.Header, now)
}
