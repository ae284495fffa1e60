package httpretry

import (
	"context"
	"net/http"
	"time"
)

// DeadlineHandler is server-side middleware that bounds each request by the
// time its caller has left and keeps retries at one layer across services.
//
// It sets the request context's deadline to the earliest of now plus the
// caller's [TimeoutHeader], now plus maxTimeout (none when 0 or less) and
// any deadline it already has; a missing or malformed header never extends
// anything. A request whose time is spent is answered 503 with
// "X-Should-Retry: false" without reaching next. A request that carries
// [AttemptHeader] came from a retrying client, which owns its retries:
// every Transport used with its context makes a single attempt. Work
// detached from the request keeps its own (see [WithOwnRetries] and
// docs/rules.md, "Retry at one layer").
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
