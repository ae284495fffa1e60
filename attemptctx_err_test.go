package httpretry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestLazyCancelCtxErrNeverChangesOnceSet: a context's Err, once non-nil,
// never changes (context.Context's contract), and a lazyCancelCtx
// canceled before anything derived from it reports context.Canceled,
// before and after something derives from it, even when its parent ends
// later with another error (here its deadline).
func TestLazyCancelCtxErrNeverChangesOnceSet(t *testing.T) {
	parent, cancelParent := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelParent()
	c := newLazyCancelCtx(parent)
	c.cancel()
	if err := c.Err(); err != context.Canceled {
		t.Fatalf("Err after cancel = %v; want context.Canceled", err)
	}
	<-parent.Done() // the parent's deadline passes
	if err := c.Err(); err != context.Canceled {
		t.Errorf("Err once the parent's deadline passed = %v; want context.Canceled still", err)
	}
	<-c.Done() // derives
	if err := c.Err(); err != context.Canceled {
		t.Errorf("Err once Done was asked for = %v; want context.Canceled, as before", err)
	}
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	if err := child.Err(); err != context.Canceled {
		t.Errorf("a child derived after cancel: Err = %v; want context.Canceled", err)
	}
}

// TestLazyCancelCtxErrOfAnEndedParentNotChangedByCancel: once the parent
// ended (Err non-nil through the lazyCancelCtx), canceling the
// lazyCancelCtx must not change its Err.
func TestLazyCancelCtxErrOfAnEndedParentNotChangedByCancel(t *testing.T) {
	parent, cancelParent := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelParent()
	c := newLazyCancelCtx(parent)
	before := c.Err()
	if !errors.Is(before, context.DeadlineExceeded) {
		t.Fatalf("Err of a context whose parent's deadline passed = %v", before)
	}
	c.cancel()
	if err := c.Err(); err != before {
		t.Errorf("Err after cancel = %v; it was %v before: Err never changes once set", err, before)
	}
	<-c.Done()
	if err := c.Err(); err != before {
		t.Errorf("Err once derived = %v; it was %v before", err, before)
	}
}

// TestLazyCancelCtxCauseAgreesWithErr: context.Cause of a canceled
// lazyCancelCtx is non-nil whenever Err is (Cause returns nil only for a
// context not canceled yet), whatever its parent.
func TestLazyCancelCtxCauseAgreesWithErr(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	c := newLazyCancelCtx(parent)
	c.cancel()
	if err, cause := c.Err(), context.Cause(c); err != nil && cause == nil {
		t.Errorf("Err = %v but context.Cause = nil", err)
	}
}

// TestLazyCancelCtxAgreesUnderConcurrentCancelAndDerive: cancel racing
// Done, Err, Value, context.WithCancel and context.AfterFunc: once cancel
// returned, every view says canceled, and a child derived at any point
// ends; Err never reads nil after it read non-nil.
func TestLazyCancelCtxAgreesUnderConcurrentCancelAndDerive(t *testing.T) {
	type key struct{}
	for i := 0; i < 2000; i++ {
		parent := context.WithValue(context.Background(), key{}, "v")
		c := newLazyCancelCtx(parent)
		var wg sync.WaitGroup
		start := make(chan struct{})
		children := make(chan context.Context, 2)
		afterRan := make(chan struct{})
		wg.Add(5)
		go func() { defer wg.Done(); <-start; c.cancel() }()
		go func() { defer wg.Done(); <-start; _ = c.Done() }()
		go func() {
			defer wg.Done()
			<-start
			seen := false
			for j := 0; j < 10; j++ {
				err := c.Err()
				if seen && err == nil {
					t.Error("Err read nil after it read non-nil")
				}
				seen = seen || err != nil
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if v := c.Value(key{}); v != "v" {
				t.Errorf("Value = %v; want the parent's", v)
			}
			ch, cancel := context.WithCancel(c)
			_ = cancel
			children <- ch
		}()
		go func() {
			defer wg.Done()
			<-start
			context.AfterFunc(c, func() { close(afterRan) })
		}()
		close(start)
		wg.Wait()
		if err := c.Err(); err != context.Canceled {
			t.Fatalf("round %d: Err after cancel = %v", i, err)
		}
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Done not closed after cancel", i)
		}
		ch := <-children
		select {
		case <-ch.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a child derived while canceling never ended", i)
		}
		if ch.Err() != context.Canceled {
			t.Fatalf("round %d: child Err = %v", i, ch.Err())
		}
		select {
		case <-afterRan:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: context.AfterFunc never ran", i)
		}
	}
}
