package httpretry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// endingParent is a context that ends (its deadline passes) at the moment
// its Err is first asked: onEnd runs then, as another goroutine that
// reads the attempt's context right after the parent ended would.
type endingParent struct {
	context.Context
	ended atomic.Bool
	onEnd func()
}

func (p *endingParent) Err() error {
	if p.ended.CompareAndSwap(false, true) {
		if p.onEnd != nil {
			p.onEnd()
		}
		return nil // read just before it ended
	}
	return context.DeadlineExceeded
}

func (p *endingParent) Done() <-chan struct{} {
	ch := make(chan struct{})
	if p.ended.Load() {
		close(ch)
	}
	return ch
}

// The context contract: once Err returns a non-nil error, every later
// call returns the same one. A cancel racing the parent's end may be
// taken for either cause, but not for both: a reader that saw the
// parent's deadline must not see context.Canceled afterwards.
func TestLazyCancelCtxErrNeverChangesWhenCancelRacesTheParentsEnd(t *testing.T) {
	t.Parallel()
	p := &endingParent{Context: context.Background()}
	c := newLazyCancelCtx(p)
	var seen error
	p.onEnd = func() { seen = c.Err() }
	c.cancel()
	after := c.Err()
	if seen == nil {
		t.Fatal("the reader saw no error once the parent ended")
	}
	if !errors.Is(after, seen) {
		t.Errorf("Err was %v, then %v after cancel returned; want it never to change once set", seen, after)
	}
	// And Cause agrees with Err.
	if cause := context.Cause(c); !errors.Is(cause, after) {
		t.Errorf("Cause %v, Err %v; want them to agree", cause, after)
	}
}

// A canceled attempt context whose parent later ends still says
// context.Canceled, from Err, Done's derived context and Cause alike.
func TestLazyCancelCtxCanceledFirstStaysCanceled(t *testing.T) {
	t.Parallel()
	parent, cancelParent := context.WithTimeout(context.Background(), time.Hour)
	c := newLazyCancelCtx(parent)
	c.cancel()
	cancelParent()
	<-c.Done()
	if err := c.Err(); err != context.Canceled {
		t.Errorf("Err %v; want context.Canceled", err)
	}
	if cause := context.Cause(c); cause != context.Canceled {
		t.Errorf("Cause %v; want context.Canceled", cause)
	}
}
