package redisretry

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two operations hold local tokens while Redis is unusable: one whose
// context is canceled, one whose context never ends (a request without a
// deadline). The canceled one's wait is cut short and it refunds at once;
// its record then outlives its context by grantGrace only. The refund of
// the operation whose context never ends, made after the Budget went back
// to the shared bucket and long after that grace, still returns its token
// to the local bucket: whichever record a refund takes, the shared bucket
// never gains a token it did not give.
func TestRefundOfAnEndedOperationLeavesTheRecordOfALiveOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-ended-leaves-live"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, key, 20, 0, Options{FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond, CallTimeout: patient})
	canceled, cancel := context.WithCancel(ctx)
	defer cancel()
	if !b.Withdraw(canceled) || !b.Withdraw(ctx) || b.State() != Local {
		t.Fatalf("Withdraw: state %v; want two tokens from the local bucket", b.State())
	}
	if got := b.local.Tokens(); got != 0 {
		t.Fatalf("local tokens = %v; want 0 (2 less the two withdrawn)", got)
	}
	cancel()
	b.Refund() // the canceled operation's token, refunded as its wait ends
	if got := b.local.Tokens(); got != 1 {
		t.Fatalf("local tokens after the first refund = %v; want 1", got)
	}
	// Past grantGrace, the record of the ended operation is gone; the
	// live operation's token must still be on record.
	time.Sleep(grantGrace + 100*time.Millisecond)
	if got := b.openGrants(); got != 1 {
		t.Errorf("records of local tokens out = %d after the ended operation's grace; want 1, the live operation's", got)
	}
	rdb.Del(ctx, key)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if n := drain(t, b); n != 20 {
		t.Fatalf("drained %d from the shared bucket; want 20", n)
	}

	b.Refund() // the live operation's local token
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 0 {
		t.Errorf("shared tokens after refunding a local token = %v; want 0", got)
	}
	if got := b.local.Tokens(); got != 2 {
		t.Errorf("local tokens after both refunds = %v; want 2", got)
	}
}

// Many goroutines withdraw from the local bucket and refund half of what
// they got, at once, some under a process-wide context that never ends
// and some under their own contexts, ended just before their refunds: the
// records stay within their bound, every local token still out is either
// recorded or counted past the bound, and once the Budget is shared again
// refunding them all leaves the shared bucket as it was.
func TestLocalGrantRecordsHoldUnderConcurrentWithdrawalsAndRefunds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-concurrent-records"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const capacity = 10000 // more than the tokens kept out
	b := newBudget(t, rdb, key, capacity, 1, Options{FleetSize: 1, CallTimeout: patient, FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond})
	const goroutines, each = 16, 600
	var out atomic.Int64 // local tokens granted and not refunded
	var mu sync.Mutex
	var running []context.CancelFunc // of the operations that kept their tokens
	defer func() {
		for _, end := range running {
			end()
		}
	}()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				b.Deposit()
				op, end := context.WithCancel(ctx)
				if g%2 == 0 {
					op = ctx // the process-wide context
				}
				if !b.Withdraw(op) {
					t.Errorf("Withdraw refused; want a token from the local bucket")
					end()
					return
				}
				if i%2 == 0 {
					end() // the caller cancels, and the wait's token is refunded
					b.Refund()
				} else {
					out.Add(1)
					mu.Lock()
					running = append(running, end)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if s := b.State(); s != Local {
		t.Fatalf("state = %v; want local", s)
	}
	// The operations that kept their tokens still run: their contexts
	// end only when the test does.
	b.grantsMu.Lock()
	records, unrecorded := len(b.grants), b.unrecorded
	b.grantsMu.Unlock()
	if records > maxGrantRecords {
		t.Errorf("records = %d; want at most %d, the bound", records, maxGrantRecords)
	}
	if got := int64(records) + unrecorded; got != out.Load() {
		t.Errorf("records %d + counted past the bound %d = %d; want %d, the local tokens out", records, unrecorded, got, out.Load())
	}
	rdb.Del(ctx, key)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if n := drain(t, b); n != capacity {
		t.Fatalf("drained %d from the shared bucket; want %d", n, capacity)
	}
	for range out.Load() {
		b.Refund()
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 0 {
		t.Errorf("shared tokens after refunding %d local tokens = %v; want 0", out.Load(), got)
	}
}
