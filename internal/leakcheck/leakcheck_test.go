package leakcheck

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestSettleWaitsForAGoroutineThatEnds: a report that clears before the
// patience runs out is no failure.
func TestSettleWaitsForAGoroutineThatEnds(t *testing.T) {
	calls := 0
	find := func(...goleak.Option) error {
		calls++
		if calls < 3 {
			return errors.New("still running")
		}
		return nil
	}
	if err := settle(time.Minute, find); err != nil || calls != 3 {
		t.Fatalf("settle = %v after %d calls; want nil after 3", err, calls)
	}
}

// TestSettleReportsAGoroutineThatNeverEnds: a report that never clears
// is returned once the patience has passed.
func TestSettleReportsAGoroutineThatNeverEnds(t *testing.T) {
	leak := errors.New("blocked for good")
	calls := 0
	find := func(...goleak.Option) error { calls++; return leak }
	if err := settle(120*time.Millisecond, find); !errors.Is(err, leak) || calls < 2 {
		t.Fatalf("settle = %v after %d calls; want the leak, asked more than once", err, calls)
	}
}

// TestFindSeesABlockedGoroutine: goleak.Find, what Main asks, reports a
// goroutine the test blocked, and nothing once it ends.
func TestFindSeesABlockedGoroutine(t *testing.T) {
	release := make(chan struct{})
	go func() { <-release }()
	if err := settle(100*time.Millisecond, goleak.Find); err == nil {
		t.Fatal("a blocked goroutine went unreported")
	}
	close(release)
	if err := settle(10*time.Second, goleak.Find); err != nil {
		t.Fatalf("after it ended: %v", err)
	}
}

func TestMain(m *testing.M) { Main(m) }
