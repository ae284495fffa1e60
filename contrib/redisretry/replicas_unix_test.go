//go:build unix

package redisretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// With WaitReplicas on a primary and its replica, a reservation Reserve
// returned is on the replica already; with the replica frozen, Reserve
// fails with ErrNotReplicated after WaitTimeout, and works again once the
// replica thaws.
func TestWaitReplicasOnSentinel(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
	replica, err := set.Replica()
	if err != nil {
		t.Fatal(err)
	}
	onReplica := replica.Client(t)
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		r, err := s.Reserve(ctx, key, "fp", time.Minute)
		if err != nil || r.State != idempotency.StateReserved {
			t.Fatalf("Reserve %s = %+v, %v; want reserved", key, r, err)
		}
		if got := onReplica.HGet(ctx, recordKey(prefix, key), "tok").Val(); got != tokenArg(r.Token) {
			t.Fatalf("replica holds token %q for %s right after Reserve; want %d", got, key, r.Token)
		}
	}
	replica.Freeze()
	_, err = s.Reserve(ctx, "frozen", "fp", time.Minute)
	replica.Thaw()
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("Reserve with the replica frozen = %v; want ErrNotReplicated", err)
	}
	if r, err := s.Reserve(ctx, "frozen", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve after the thaw = %+v, %v; want reserved (the refused one was undone)", r, err)
	}
}
