package httpretry

import (
	"net/http"
	"strconv"
	"sync/atomic"
)

// Shedder is server-side middleware that bounds how many requests Next
// serves at once and sheds retries first: a request whose [AttemptHeader]
// says it is a retry is refused once RetryLimit requests are in flight, a
// first attempt only once Limit are, so that in an overload the capacity
// goes to work not yet tried. A refused request is answered at once with
// 503 and "X-Should-Retry: false", without Retry-After (see
// docs/overload.md).
//
// The zero Shedder, with Next set, sheds nothing. A Shedder is safe for
// concurrent use; it must not be copied after its first use.
type Shedder struct {
	// Next serves the requests admitted. It must not be nil.
	Next http.Handler

	// Limit is how many requests Next serves at once; a first attempt
	// that would make more is refused. 0 (or less) means no limit.
	Limit int

	// RetryLimit is how many requests may be in flight for a retry to
	// be admitted. 0 (or less) means Limit less a tenth of it (at least
	// one), kept for first attempts, but never less than one: a retry to
	// a server serving nothing is always served. A value above Limit
	// means Limit.
	RetryLimit int

	inflight atomic.Int64
	shed     [2]atomic.Int64 // refused first attempts, refused retries
}

// shedStatus is the status of a request a [Shedder] refused.
const shedStatus = http.StatusServiceUnavailable

// retryLimit is the in-flight count at which retries are refused.
func (s *Shedder) retryLimit() int64 {
	if s.RetryLimit > 0 {
		return int64(min(s.RetryLimit, s.Limit))
	}
	return int64(max(s.Limit-max(s.Limit/10, 1), 1))
}

// isRetry reports whether a request's AttemptHeader says it is a retry:
// attempt 2 or later. A malformed value is taken as a first attempt.
func isRetry(h http.Header) bool {
	v := h[AttemptHeader]
	if len(v) == 0 {
		return false
	}
	n, err := strconv.Atoi(v[0])
	return err == nil && n > 1
}

// admits reports whether a request may be served with inflight requests
// already in flight, itself not counted: limit first attempts, retryLimit
// retries. A limit of 0 or less admits everything.
func admits(inflight, limit, retryLimit int64, retry bool) bool {
	if limit <= 0 {
		return true
	}
	if retry {
		return inflight < retryLimit
	}
	return inflight < limit
}

// ServeHTTP serves r with Next, or refuses it at once (see [Shedder]).
func (s *Shedder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	retry := isRetry(r.Header)
	if !s.enter(retry) {
		i := 0
		if retry {
			i = 1
		}
		s.shed[i].Add(1)
		w.Header().Set(shouldRetryHeader, "false")
		w.WriteHeader(shedStatus)
		return
	}
	defer s.inflight.Add(-1)
	s.Next.ServeHTTP(w, r)
}

// enter counts a request in flight when admits allows it, and reports
// whether it did: a refused request never counts, so that a flood of
// refusals cannot crowd out the requests admitted.
func (s *Shedder) enter(retry bool) bool {
	limit, retryLimit := int64(s.Limit), s.retryLimit()
	for {
		n := s.inflight.Load()
		if !admits(n, limit, retryLimit, retry) {
			return false
		}
		if s.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Shed returns how many first attempts and how many retries the Shedder
// has refused.
func (s *Shedder) Shed() (firstAttempts, retries int64) {
	return s.shed[0].Load(), s.shed[1].Load()
}
