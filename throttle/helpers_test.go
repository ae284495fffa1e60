package throttle

import (
	"net/http"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
)

// realClock is the system clock, for tests that run in real time.
var realClock = clockwork.NewRealClock()

// admit is Admit for an operation whose request is not known, as the
// tests of the draw and the quota ask it.
func (th *Throttle) admit(d *Dest, clock Clock) (time.Time, error) {
	_, reset, err := th.Admit(d, nil, clock)
	return reset, err
}

// record is Record for an attempt that got resp or err, sent at sent,
// with overload as httpretry's Transport decides it for the statuses
// and errors these tests use: a 429, 503 or 529, or any error.
func (th *Throttle) record(d *Dest, resp *http.Response, err error, sent time.Time, clock Clock) {
	th.Record(d, new(resultOf(resp, err, sent, orSystem(clock).Now())), clock)
}

// resultOf describes resp or err as the Transport would at now, a 429's
// Retry-After (seconds or an HTTP date) included.
func resultOf(resp *http.Response, err error, sent, now time.Time) Result {
	r := Result{Sent: sent, Overload: err != nil}
	if resp == nil {
		return r
	}
	r.Status, r.Header, r.Request = resp.StatusCode, resp.Header, resp.Request
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, 529:
		r.Overload = true
	}
	v := resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusTooManyRequests || v == "" {
		return r
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		r.RetryAfter, r.HasRetryAfter = time.Duration(n)*time.Second, true
	} else if at, err := http.ParseTime(v); err == nil {
		r.RetryAfter, r.HasRetryAfter = max(at.Sub(now), 0), true
	}
	return r
}
