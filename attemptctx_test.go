package httpretry

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

type lazyKey struct{}

// isDone reports whether ctx's Done channel is closed, without waiting.
func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// TestLazyCancelCtxEndsWhenCanceledWhetherOrNotDoneWasAskedFor: an
// attempt's context is canceled before anything asked for its Done
// channel (the Base had not looked yet) or after (it had): either way its
// Err is context.Canceled and its Done channel is closed, and a context
// derived from it ends too.
func TestLazyCancelCtxEndsWhenCanceledWhetherOrNotDoneWasAskedFor(t *testing.T) {
	t.Parallel()
	for _, askFirst := range []bool{false, true} {
		c := newLazyCancelCtx(context.Background())
		if askFirst && isDone(c) {
			t.Fatalf("askFirst %v: done before cancel", askFirst)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("askFirst %v: Err before cancel = %v; want nil", askFirst, err)
		}
		c.cancel()
		c.cancel() // a second cancel does nothing
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("askFirst %v: Err = %v; want context.Canceled", askFirst, err)
		}
		if !isDone(c) {
			t.Errorf("askFirst %v: Done not closed after cancel", askFirst)
		}
		child, stop := context.WithCancel(c)
		if !isDone(child) {
			t.Errorf("askFirst %v: a context derived after cancel is not done", askFirst)
		}
		stop()
	}
}

// TestLazyCancelCtxEndsWithItsParent: the attempt's context ends when the
// operation's does, with the operation's error and cause, whether its
// Done channel was asked for before the parent ended or after.
func TestLazyCancelCtxEndsWithItsParent(t *testing.T) {
	t.Parallel()
	cause := errors.New("operation over")
	for _, askFirst := range []bool{false, true} {
		parent, cancel := context.WithCancelCause(context.Background())
		c := newLazyCancelCtx(parent)
		if askFirst {
			c.Done()
		}
		cancel(cause)
		if !isDone(c) {
			t.Errorf("askFirst %v: not done after its parent ended", askFirst)
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("askFirst %v: Err = %v; want context.Canceled", askFirst, err)
		}
		if got := context.Cause(c); got != cause {
			t.Errorf("askFirst %v: Cause = %v; want %v", askFirst, got, cause)
		}
	}
}

// TestLazyCancelCtxKeepsItsParentsValuesAndDeadline: values and the
// deadline are the parent's, before and after Done was asked for.
func TestLazyCancelCtxKeepsItsParentsValuesAndDeadline(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), lazyKey{}, "v"), 1<<40)
	defer cancel()
	want, _ := parent.Deadline()
	c := newLazyCancelCtx(parent)
	for _, when := range []string{"before Done", "after Done"} {
		if got := c.Value(lazyKey{}); got != "v" {
			t.Errorf("%s: Value = %v; want v", when, got)
		}
		if got, ok := c.Deadline(); !ok || !got.Equal(want) {
			t.Errorf("%s: Deadline = %v, %v; want %v, true", when, got, ok, want)
		}
		c.Done()
	}
	c.cancel()
}

// TestLazyCancelCtxChildNeedsNoGoroutine: a context derived from an
// attempt's context, as net/http derives one for every request, is
// registered as a child of the cancelable context it defers to, not
// watched by a goroutine of its own (what the context package starts for
// a parent it does not know), and it ends when the attempt is canceled.
func TestLazyCancelCtxChildNeedsNoGoroutine(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newLazyCancelCtx(parent)
	before := runtime.NumGoroutine()
	children := make([]context.Context, 100)
	for i := range children {
		var stop context.CancelFunc
		children[i], stop = context.WithCancel(c)
		defer stop()
	}
	if after := runtime.NumGoroutine(); after >= before+len(children) {
		t.Errorf("%d goroutines after deriving %d contexts, %d before; want none of their own", after, len(children), before)
	}
	c.cancel()
	for i, child := range children {
		if !isDone(child) {
			t.Fatalf("child %d not done after the attempt's context was canceled", i)
		}
	}
}
