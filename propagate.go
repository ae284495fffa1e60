package httpretry

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Headers that carry an operation's retry state to the next service, when
// [Transport.Propagate] is set, and that [DeadlineHandler] reads on the way in.
const (
	// AttemptHeader carries the 1-based number of the attempt. Its
	// presence tells the receiving service that a retrying client owns
	// this operation's retries.
	AttemptHeader = "Retry-Attempt"
	// TimeoutHeader carries the time left for this attempt, in whole
	// milliseconds (rounded down, so that a service never believes it has
	// more time than its caller will wait).
	TimeoutHeader = "Request-Timeout"
)

// ownerKey marks a context whose operation's retries belong to an outer
// layer: an httpretry Transport further up this process, or a retrying
// client upstream (see DeadlineHandler). A Transport that sees it makes exactly
// one attempt: three layers of three attempts would make 27.
type ownerKey struct{}

// ownerMark is the value under ownerKey: the Done channel of the context
// that was marked, nil when that context never ends. The outer layer owns
// retries only for work that lives and dies with that context. (One
// pointer-shaped field: storing it in the context allocates nothing.)
type ownerMark struct{ done <-chan struct{} }

// retriesOwned reports whether ctx belongs to an operation whose retries
// another layer owns. The mark is a context value, and values survive
// [context.WithoutCancel]; the ownership must not. Work detached from the
// marked context keeps its own retries: a context that no longer ends
// with it (its Done is nil, as WithoutCancel's is), or any context once
// the marked one has ended (the request was answered, the outer operation
// is over, and nobody will retry what is still running).
func retriesOwned(ctx context.Context) bool {
	m, ok := ctx.Value(ownerKey{}).(ownerMark)
	if !ok {
		return false
	}
	if m.done == nil {
		// The marked context never ends: nothing can be detached from it.
		return true
	}
	return ctx.Done() != nil && !closed(m.done)
}

// withRetriesOwned marks ctx so that every Transport below makes a single
// attempt, for as long as the work stays tied to ctx.
func withRetriesOwned(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, ownerMark{done: ctx.Done()})
}

// ownerGone is the Done channel of a mark whose owner is gone: closed, as
// that of a marked context that has ended.
var ownerGone = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// WithOwnRetries returns a context derived from ctx whose requests own their
// retries again, whatever layer owned ctx's: a Transport makes its full
// MaxAttempts for them, as if no [DeadlineHandler] or outer Transport were
// above it. ctx's values, deadline and cancellation are kept.
//
// Use it for work detached from a request that nobody upstream will retry,
// once a deadline is added to it (see docs/rules.md, "Retry at one layer"):
//
//	detached := httpretry.WithOwnRetries(context.WithoutCancel(r.Context()))
//	ctx, cancel := context.WithTimeout(detached, 10*time.Second)
func WithOwnRetries(ctx context.Context) context.Context {
	if _, ok := ctx.Value(ownerKey{}).(ownerMark); !ok {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, ownerMark{done: ownerGone})
}

// marksOwnership reports whether attempts sent through base must carry
// the ownership mark. Nothing below an *http.Transport retries on its own
// behalf (its hidden connection-level retries are bounded by the attempt's
// context like the rest of it), so the common case costs nothing; any
// other Base might wrap another httpretry Transport.
func marksOwnership(base http.RoundTripper) bool {
	_, plain := base.(*http.Transport)
	return !plain
}

// marksOwnership reports whether t's attempts must carry the ownership
// mark: those through base, or the hedges through Hedging.Base, which may
// wrap a retrying Transport when base does not.
func (t *Transport) marksOwnership(base http.RoundTripper) bool {
	if marksOwnership(base) {
		return true
	}
	h := t.Hedging
	return h != nil && h.Base != nil && marksOwnership(h.Base)
}

// propagate sets AttemptHeader (attempt, 1-based) and TimeoutHeader on
// req, an attempt's own copy of the caller's request, giving it a copy of
// the header so that the caller's is not modified. limit is the time left
// for the attempt, sent in whole milliseconds (a negative one as 0) when
// bounded; when not bounded no TimeoutHeader is sent.
func propagate(req *http.Request, attempt int, limit time.Duration, bounded bool) {
	h := req.Header.Clone()
	if h == nil {
		h = make(http.Header, 2)
	}
	h.Set(AttemptHeader, strconv.Itoa(attempt))
	if bounded {
		h.Set(TimeoutHeader, timeoutValue(limit))
	} else {
		h.Del(TimeoutHeader)
	}
	req.Header = h
}

// timeoutValue is TimeoutHeader's value for the time left: whole
// milliseconds, rounded down, and 0 for a time already spent.
func timeoutValue(left time.Duration) string {
	return strconv.FormatInt(max(left, 0).Milliseconds(), 10)
}
