package redisretry

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Withdrawals against an empty bucket cost at most one Redis command for
// ten: each refusal is remembered, and the process answers the next ones.
func TestEmptyBucketCostsFewCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	b := newBudget(t, rdb, "cost-empty", 20, 0, Options{FlushInterval: time.Hour, CallTimeout: patient})
	drain(t, b)
	c := &counter{}
	rdb.AddHook(c)
	const n = 200
	for i := range n {
		if b.Withdraw(ctx) {
			t.Fatalf("Withdraw %d granted from an empty bucket", i)
		}
	}
	// Every 125ms at most (the shortest memory) one more call: a loop
	// this short stays far below the bound even on a loaded machine.
	if got := c.n.Load(); got > n/10 {
		t.Errorf("%d Withdraws on an empty bucket made %d Redis commands; want at most %d", n, got, n/10)
	}
}

// A fleet failing together, each operation a deposit and a retry asked
// for: at most one command for ten operations, and never more tokens than
// the bucket held and the operations deposited.
func TestFleetOutageCostsFewCommands(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	c := &counter{}
	rdb.AddHook(c)
	const processes, ops = 20, 100
	budgets := make([]*Budget, processes)
	for i := range budgets {
		budgets[i] = newBudget(t, rdb, "cost-fleet", 20, 0.1, Options{FleetSize: processes, CallTimeout: patient})
	}
	var mu sync.Mutex
	granted := 0
	var wg sync.WaitGroup
	began := time.Now()
	for _, b := range budgets {
		wg.Go(func() {
			n := 0
			for range ops {
				b.Deposit()
				for b.Withdraw(context.Background()) {
					n++
				}
			}
			mu.Lock()
			granted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	// Besides the operations' own, each process's flush runs once per
	// FlushInterval however few operations it sees: a loaded machine that
	// stretches the loop adds those, and only those.
	ticks := int64(time.Since(began)/DefaultFlushInterval) + 1
	if got, most := c.n.Load(), int64(processes*ops/10)+processes*ticks; got > most {
		t.Errorf("%d failing operations made %d Redis commands in %d flush intervals; want at most %d", processes*ops, got, ticks, most)
	}
	if most := 20 + processes*ops/10; granted > most {
		t.Errorf("granted %d retries; want at most 20 + 0.1 per operation = %d", granted, most)
	}
}
