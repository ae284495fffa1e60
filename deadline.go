package httpretry

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
)

// This file holds the operation's view of time: contexts derived on the
// Transport's Clock, and whether the caller is still waiting.

// withDeadline derives a context that ends at d on the Transport's Clock,
// clock.
func (t *Transport) withDeadline(clock clockwork.Clock, parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	if t.Clock == nil {
		return context.WithDeadline(parent, d)
	}
	// clockwork's fake contexts ignore a parent that ends with
	// DeadlineExceeded; d is never later than the parent's deadline, so
	// they end first anyway.
	return clockwork.WithDeadline(parent, clock, d)
}

// callerEnded reports whether the caller's context has ended, or its
// deadline has passed on the Clock. The second test matters when an
// attempt context and the caller's share a deadline: whichever is noticed
// first, the caller's deadline is what ended the attempt. (A fake clock's
// contexts also close their Done channels asynchronously.)
//
// The deprecated Request.Cancel channel is the caller's too: net/http
// still ends an attempt when it is closed, and a wait ends with it.
func (op *operation) callerEnded() bool {
	if done(op.callerCtx) || closed(op.cancelChan()) {
		return true
	}
	d, ok := op.callerCtx.Deadline()
	return ok && !op.clock.Now().Before(d)
}

// callerErr returns the caller's context's error once callerEnded; a
// closed Request.Cancel channel counts as context.Canceled.
func (op *operation) callerErr() error {
	if done(op.callerCtx) {
		return op.callerCtx.Err()
	}
	if closed(op.cancelChan()) {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// withCause is err, the caller's context's error, joined with the cause
// the context was canceled with (context.WithCancelCause, as an errgroup
// cancels), when it has one of its own: net/http's error carries it too.
func withCause(ctx context.Context, err error) error {
	if !done(ctx) {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// cancelChan returns the caller's Request.Cancel channel, nil when unset:
// a nil channel is never ready in a select.
func (op *operation) cancelChan() <-chan struct{} {
	//lint:ignore SA1019 callers that still set the deprecated channel expect it to end the whole operation, waits included
	return op.req.Cancel
}

// withCancelChan returns a context that also ends when ch (the deprecated
// Request.Cancel) is closed, for a wait that only a context interrupts,
// and the function that releases it. A goroutine watches ch until then;
// with a nil ch, ctx is returned as it is.
func withCancelChan(ctx context.Context, ch <-chan struct{}) (context.Context, context.CancelFunc) {
	if ch == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// closed reports whether ch is closed, without blocking; a nil channel is
// not.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// done reports whether ctx has ended, without blocking: clockwork's fake
// contexts block in Err until they end.
func done(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}
