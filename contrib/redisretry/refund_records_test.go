package redisretry

import (
	"context"
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
