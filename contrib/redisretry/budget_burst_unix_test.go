//go:build unix

package redisretry

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fifty requests of one process fail at once on a frozen Redis (a hung
// host: connections accepted, nothing answered). They wait for one call,
// not fifty: the one call times out, the Budget falls back, and every
// Withdraw is answered by the local bucket, which grants its capacity
// and refuses the rest.
func TestBudgetBurstOnFrozenRedisMakesOneCall(t *testing.T) {
	t.Parallel()
	srv, rdb := server(t)
	if err := bucketScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, "burst-frozen", 20, 0, Options{FleetSize: 2, FlushInterval: time.Hour,
		MaxProbeInterval: time.Hour, CallTimeout: 300 * time.Millisecond})
	c := &counter{}
	rdb.AddHook(c)
	srv.Freeze()
	defer srv.Thaw()

	const burst = 50
	start := make(chan struct{})
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			<-start
			if b.Withdraw(context.Background()) {
				granted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	// One call; a Withdraw that read the state just before the fall
	// back and boarded just after the call landed may make one more.
	if got := c.n.Load(); got > 2 {
		t.Errorf("a burst of %d Withdraws on a frozen Redis sent %d commands; want 1 (2 at most)", burst, got)
	}
	if s := b.State(); s != Local {
		t.Errorf("state = %v; want local", s)
	}
	if got := granted.Load(); got != 10 {
		t.Errorf("granted %d; want the local bucket's 20/2 = 10", got)
	}
}
