//go:build drills

package redisretry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// A Sentinel failover to a replica configured with allkeys-lru: the very
// next Reserve, on the promoted replica, is refused with the policy it
// found there, although the old primary's noeviction had just been
// checked (no verdict of one server stands for another).
func TestDrillEvictionPolicyCheckedOnTheReplicaASentinelFailoverPromotes(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t, "--maxmemory", "100mb")
	replica, err := set.Replica()
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Client(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	s, prefix := newIdempotencyStore(t, set.Client(t), IdempotencyOptions{CallTimeout: patient})
	if r, err := s.Reserve(ctx, "before", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve on the noeviction primary = %+v, %v; want reserved", r, err)
	}
	if err := set.Failover(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Reserve(ctx, "after", "fp", time.Minute)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "(it is allkeys-lru)") {
		t.Fatalf("first Reserve after the failover = %v; want ErrEvictionPolicy naming allkeys-lru", err)
	}
	if n := replica.Client(t).Exists(ctx, recordKey(prefix, "after"), lockKey(prefix, "after")).Val(); n != 0 {
		t.Fatalf("%d records of the refused key on the promoted replica; want none", n)
	}
}

// A Cluster replica configured with allkeys-lru takes over its master's
// slots (CLUSTER FAILOVER): the next Reserve of a key in those slots is
// refused by the new master, whatever slot map the client holds.
func TestDrillEvictionPolicyCheckedOnTheNewMasterOfAClusterSlot(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 1, "--maxmemory", "100mb")
	rdb := c.Client(t)
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := c.Replicas(masters[0])
	if err != nil || len(replicas) != 1 {
		t.Fatalf("replicas of the first master = %v, %v; want 1", replicas, err)
	}
	if err := replicas[0].Client(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	before := keyOnMaster(t, c, rdb, prefix, masters[0])
	if r, err := s.Reserve(ctx, before, "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve on the noeviction master = %+v, %v; want reserved", r, err)
	}
	if err := c.Failover(replicas[0]); err != nil {
		t.Fatal(err)
	}
	after := keyOnMaster(t, c, rdb, prefix, replicas[0])
	_, err = s.Reserve(ctx, after, "fp", time.Minute)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "(it is allkeys-lru)") {
		t.Fatalf("first Reserve on the new master = %v; want ErrEvictionPolicy naming allkeys-lru", err)
	}
}
