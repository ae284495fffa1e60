package redisretry

import (
	"context"
	"testing"
	"time"
)

// A token withdrawn from the local bucket while Redis was unusable and
// refunded after the Budget went back to the shared bucket returns to the
// local bucket: the shared one never gave it. Once that operation ended,
// a refund goes to the shared bucket again.
func TestRefundReturnsTokenToItsOwnBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-own-bucket"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, key, 20, 0, Options{FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond, CallTimeout: patient})
	op, endOp := context.WithCancel(ctx)
	defer endOp()
	if !b.Withdraw(op) || b.State() != Local {
		t.Fatalf("Withdraw: state %v; want a token from the local bucket", b.State())
	}
	if got := b.local.Tokens(); got != 1 {
		t.Fatalf("local tokens = %v; want 1 (2 less the one withdrawn)", got)
	}
	rdb.Del(ctx, key)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if n := drain(t, b); n != 20 {
		t.Fatalf("drained %d from the shared bucket; want 20", n)
	}

	b.Refund() // the local token of op, still running
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 0 {
		t.Fatalf("shared tokens after refunding a local token = %v; want 0", got)
	}
	if got := b.local.Tokens(); got != 2 {
		t.Fatalf("local tokens after the refund = %v; want 2", got)
	}

	endOp()
	eventually(t, "the ended operation forgotten", func() bool { return b.openGrants() == 0 })
	b.Refund() // a token of the shared bucket
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 1 {
		t.Fatalf("shared tokens after refunding a shared token = %v; want 1", got)
	}
}

// The records of local tokens out are bounded, even when every operation
// shares one context that never ends (a process-wide context canceled only
// at shutdown): an outage of any length costs bounded memory.
func TestLocalGrantRecordsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-bounded-records"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, key, 2, 1, Options{FleetSize: 1, CallTimeout: patient, FlushInterval: time.Hour})
	process, shutdown := context.WithCancel(ctx)
	defer shutdown()
	const withdrawals = 3 * maxGrantRecords
	for i := range withdrawals {
		b.Deposit()
		if !b.Withdraw(process) {
			t.Fatalf("Withdraw %d refused; want a token from the local bucket", i)
		}
	}
	if s := b.State(); s != Local {
		t.Fatalf("state = %v; want local", s)
	}
	if got := b.openGrants(); got != maxGrantRecords {
		t.Fatalf("records of local tokens out = %d after %d withdrawals; want %d, the bound", got, withdrawals, maxGrantRecords)
	}
}

// A retry's wait cut short by its caller's cancellation refunds the token
// just after the context ended (httpretry's Transport does exactly this):
// a local token refunded so still returns to the local bucket, however
// soon the Budget noticed the end.
func TestRefundOnCancellationReturnsLocalTokenToLocalBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-on-cancel"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, key, 20, 0, Options{FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond, CallTimeout: patient})
	op, cancel := context.WithCancel(ctx)
	defer cancel()
	if !b.Withdraw(op) || b.State() != Local {
		t.Fatalf("Withdraw: state %v; want a token from the local bucket", b.State())
	}
	rdb.Del(ctx, key)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if n := drain(t, b); n != 20 {
		t.Fatalf("drained %d from the shared bucket; want 20", n)
	}

	cancel()
	// The Budget's own reaction to the end may come first: give it
	// every chance (up to 500ms) before the refund.
	deadline := time.Now().Add(500 * time.Millisecond)
	for b.openGrants() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.Refund()
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 0 {
		t.Fatalf("shared tokens after refunding a local token on cancellation = %v; want 0", got)
	}
	if got := b.local.Tokens(); got != 2 {
		t.Fatalf("local tokens after the refund = %v; want 2", got)
	}
}

// A request without a deadline or cancellation (http.NewRequest with a
// Transport without Timeout: its context is context.Background(), which
// never ends) withdraws a token from the local bucket while Redis is
// unusable, and refunds it after the Budget went back to the shared
// bucket: the token returns to the local bucket, and the shared bucket
// gains nothing it did not give.
func TestRefundOfLocalTokenWithContextThatNeverEndsReturnsToLocalBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-never-ending"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, key, 20, 0, Options{FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond, CallTimeout: patient})
	if !b.Withdraw(ctx) || b.State() != Local {
		t.Fatalf("Withdraw: state %v; want a token from the local bucket", b.State())
	}
	rdb.Del(ctx, key)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if n := drain(t, b); n != 20 {
		t.Fatalf("drained %d from the shared bucket; want 20", n)
	}

	b.Refund() // the local token, withdrawn under a context that never ends
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 0 {
		t.Fatalf("shared tokens after refunding a local token = %v; want 0", got)
	}
	if got := b.local.Tokens(); got != 2 {
		t.Fatalf("local tokens after the refund = %v; want 2", got)
	}
}

// Past the bound on the records of local tokens out, the oldest records
// are only counted, and their refunds still go to the local bucket:
// after more local withdrawals than the bound, under a context that never
// ends, as many refunds leave the shared bucket as it was.
func TestRefundPastTheRecordBoundStillReturnsToLocalBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	const key = "refund-past-bound"
	if err := rdb.Set(ctx, key, "not a count", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, key, 2, 1, Options{FleetSize: 1, CallTimeout: patient, FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond})
	const withdrawals = maxGrantRecords + 100
	for i := range withdrawals {
		b.Deposit()
		if !b.Withdraw(ctx) {
			t.Fatalf("Withdraw %d refused; want a token from the local bucket", i)
		}
	}
	if got := b.openGrants(); got != maxGrantRecords {
		t.Fatalf("records = %d after %d withdrawals; want %d, the bound", got, withdrawals, maxGrantRecords)
	}
	rdb.Del(ctx, key)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if n := drain(t, b); n != 2 {
		t.Fatalf("drained %d from the shared bucket; want 2", n)
	}
	for range withdrawals {
		b.Refund()
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 0 {
		t.Fatalf("shared tokens after %d refunds of local tokens = %v; want 0", withdrawals, got)
	}
	b.Refund() // no local token is out any more: a shared one
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 1 {
		t.Fatalf("shared tokens after refunding a shared token = %v; want 1", got)
	}
}
