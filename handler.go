package httpretry

import (
	"context"
	"net/http"
	"time"
)

// DeadlineHandler is server-side middleware that bounds each request by the time
// its caller has left and keeps retries at one layer across services.
//
// It sets the request context's deadline to the earliest of: now plus the
// caller's [TimeoutHeader], now plus maxTimeout, and any deadline the
// context already has. A missing, malformed, negative or huge
// TimeoutHeader never extends anything, so external callers cannot buy
// unlimited work with a distant deadline; maxTimeout of 0 or less sets no
// local maximum.
//
// A request whose propagated time is already spent (TimeoutHeader 0) is
// not handed to next: it is answered at once with 503 Service Unavailable
// and "X-Should-Retry: false", without Retry-After.
//
// When the request carries [AttemptHeader], it came from a retrying client,
// which owns the operation's retries: every httpretry Transport used with
// the request's context while serving it makes a single attempt, and still
// propagates the shorter deadline to the next hop when its Propagate is
// set. Three services that each retry three times would otherwise send 27
// requests to the last one. Work detached from the request keeps its own
// retries, since the client upstream will not retry it: a context made
// with [context.WithoutCancel], and any context once the request has
// ended.
func DeadlineHandler(next http.Handler, maxTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var deadline time.Time
		if maxTimeout > 0 {
			deadline = now.Add(maxTimeout)
		}
		if left, ok := parseTimeoutHeader(r.Header.Get(TimeoutHeader)); ok {
			if left == 0 {
				w.Header().Set(shouldRetryHeader, "false")
				http.Error(w, "httpretry: the caller's deadline has passed", http.StatusServiceUnavailable)
				return
			}
			if d := now.Add(left); deadline.IsZero() || d.Before(deadline) {
				deadline = d
			}
		}
		ctx := r.Context()
		if _, ok := r.Header[AttemptHeader]; ok {
			ctx = withRetriesOwned(ctx)
		}
		if !deadline.IsZero() {
			// WithDeadline keeps an earlier deadline the context already has.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		if ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// maxPropagated caps a propagated timeout. Any value beyond it is
// "huge": it grants nothing beyond maxTimeout, and cannot overflow.
const maxPropagated = 24 * time.Hour

// parseTimeoutHeader parses whole milliseconds (1*DIGIT). Malformed or
// negative values are ignored; huge ones are capped.
func parseTimeoutHeader(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	const limit = int64(maxPropagated / time.Millisecond)
	var ms int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = min(ms*10+int64(c-'0'), limit)
	}
	return time.Duration(ms) * time.Millisecond, true
}
