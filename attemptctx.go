package httpretry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds what ends an attempt's own context, and the context a
// hedged operation's attempt is sent with when no time limit derives one.

// canceler ends an attempt's context, releasing what it holds; calling
// cancel more than once, or concurrently, is allowed.
type canceler interface{ cancel() }

// cancelFunc is a [context.CancelFunc] as a canceler. A func value is
// pointer-shaped: making it an interface allocates nothing.
type cancelFunc context.CancelFunc

func (f cancelFunc) cancel() { f() }

// lazyCancelCtx is a context that ends when its parent does or when it is
// canceled: each attempt of a hedged operation has one, so that another
// attempt's win can end it alone. It is allocated with the wrapper of the
// response body that releases it (body), in one allocation.
//
// The standard library's cancelable context, which alone can deliver
// Done, is derived from the parent only when something asks for Done (or
// derives a context of its own, which asks): a Base that never does, as
// an in-memory one, sends the attempt for this one allocation. Once
// derived, every method defers to it, so that a context derived from this
// one (net/http derives one per request) is its child, with no goroutine
// to watch it; before, Value and Deadline are the parent's, and Err says
// context.Canceled once canceled (the parent's error if it ended first).
// Err never changes once it is not nil.
type lazyCancelCtx struct {
	parent context.Context
	// state says whether the context was canceled before anything was
	// derived (lazyCanceled), was found ended with its parent
	// (lazyEnded), or derived was made (lazyDerived); derived
	// and cancelDerived are written once, before state says lazyDerived:
	// a reader that sees it may read them without the lock.
	state         atomic.Uint32
	derived       context.Context
	cancelDerived context.CancelFunc
	mu            sync.Mutex // held while derived is made
	// body is the wrapper of the response body returned with this
	// context's attempt (see wrapBody), allocated with it.
	body cancelBody
}

// The states of a lazyCancelCtx.
const (
	lazyFresh    = iota // neither canceled, nor ended, nor derived
	lazyCanceled        // canceled before anything was derived
	lazyEnded           // Err found the parent ended before anything was derived or canceled
	lazyDerived         // derived made (canceled already if it was)
)

func newLazyCancelCtx(parent context.Context) *lazyCancelCtx {
	return &lazyCancelCtx{parent: parent}
}

// requestWithCtx is a request and the lazyCancelCtx it carries, allocated
// together.
type requestWithCtx struct {
	req http.Request
	ctx lazyCancelCtx
}

// withLazyCancel returns a copy of req carrying a lazyCancelCtx of its
// context, and that context, in one allocation: req.WithContext inlines,
// so that the copy it makes stays on the stack.
func withLazyCancel(req *http.Request) (*http.Request, *lazyCancelCtx) {
	rc := new(requestWithCtx)
	rc.ctx.parent = req.Context()
	rc.req = *req.WithContext(&rc.ctx)
	return &rc.req, &rc.ctx
}

// loaded returns the derived context, or nil when none was derived yet.
func (c *lazyCancelCtx) loaded() context.Context {
	if c.state.Load() != lazyDerived {
		return nil
	}
	return c.derived
}

// derive returns the derived context, deriving it the first time: a
// child of the parent, or, when c was canceled first, a context canceled
// already that holds the parent's values (context.WithoutCancel), whose
// Err, like c's, says context.Canceled even if the parent ended since. It
// is published only once it says what c said.
func (c *lazyCancelCtx) derive() context.Context {
	if d := c.loaded(); d != nil {
		return d
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch c.state.Load() {
		case lazyDerived:
			return c.derived
		case lazyCanceled:
			d, cancel := context.WithCancel(context.WithoutCancel(c.parent))
			cancel()
			c.derived, c.cancelDerived = d, cancel
			c.state.Store(lazyDerived)
			return d
		}
		d, cancel := context.WithCancel(c.parent)
		c.derived, c.cancelDerived = d, cancel
		if st := c.state.Load(); st == lazyEnded || c.state.CompareAndSwap(lazyFresh, lazyDerived) {
			// An ended state changes only here, under mu; the parent
			// ended, so d has its error.
			c.state.Store(lazyDerived)
			return d
		}
		cancel() // canceled meanwhile: derived again, canceled
	}
}

func (c *lazyCancelCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *lazyCancelCtx) Done() <-chan struct{} { return c.derive().Done() }

// Err is the derived context's, context.Canceled when canceled first,
// else the parent's. Once it said the parent's error, it keeps saying
// it: the state records that the parent ended first, so that a cancel
// racing the parent's end is taken for one cause or the other, never
// both.
func (c *lazyCancelCtx) Err() error {
	switch c.state.Load() {
	case lazyDerived:
		return c.derived.Err()
	case lazyCanceled:
		return context.Canceled
	case lazyEnded:
		return c.parent.Err()
	}
	err := c.parent.Err()
	if err == nil || c.state.CompareAndSwap(lazyFresh, lazyEnded) {
		return err
	}
	return c.Err() // canceled or derived meanwhile
}

// Value is the parent's value, but for a canceled context, which derives
// one canceled already: context.Cause looks its cancellation up through
// Value, and finds it there.
func (c *lazyCancelCtx) Value(key any) any {
	switch c.state.Load() {
	case lazyDerived:
		return c.derived.Value(key)
	case lazyCanceled:
		return c.derive().Value(key)
	}
	return c.parent.Value(key) // fresh, or ended with the parent
}

// cancel ends c, and the context derived from it if any. Before anything
// was derived it takes no lock; once the parent has ended, it changes
// nothing c says (Err stays the parent's). A cancel racing the parent's
// end is taken for one or the other (see Err).
func (c *lazyCancelCtx) cancel() {
	if c.state.Load() == lazyFresh && c.parent.Err() == nil && c.state.CompareAndSwap(lazyFresh, lazyCanceled) {
		return
	}
	if c.state.Load() == lazyDerived {
		c.cancelDerived()
	}
}
