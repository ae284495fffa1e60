//go:build unix

package redisretry

import (
	"context"
	"testing"
	"time"
)

// Expected: the lease taken by a Withdraw that timed out on a frozen Redis is not lost when Redis thaws and runs it: the bucket lacks at most one token.
func TestLeaseOfATimedOutWithdrawIsNotLostWhenRedisThaws(t *testing.T) {
	t.Parallel()
	srv, rdb := server(t)
	if err := bucketScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, "thaw-lease", 20, 0, Options{FleetSize: 1, FlushInterval: 50 * time.Millisecond,
		MaxProbeInterval: 200 * time.Millisecond, CallTimeout: 300 * time.Millisecond})
	srv.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	if !b.Withdraw(context.Background()) {
		t.Fatal("refused by a full local bucket")
	}
	if b.State() != Local {
		t.Fatal("a frozen Redis did not switch the budget to its local bucket")
	}
	srv.Thaw()
	thawed = true
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rawTokens(t, srv.Client(t), "thaw-lease", 20); got < 19 {
		t.Errorf("after one retry answered locally while Redis was frozen, the shared bucket holds %v tokens; want at least 19", got)
	}
}
