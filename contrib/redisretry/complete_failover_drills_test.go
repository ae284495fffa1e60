//go:build drills

package redisretry

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// A primary with two replicas behind three sentinels, a store with
// WaitReplicas 2 and the default CallTimeout (1s): 24 reservations made
// before a SENTINEL FAILOVER, and their Completes sent one every 100ms
// from the moment the failover is asked for, so that some meet the old
// primary with the promoted replica gone (too few acknowledge) or turned
// replica (READONLY). With CompleteTimeout 20s every Complete returns
// nil and the new primary replays every response: no key is left
// reserved there for a retry to take over once its lock expires and
// charge the order a second time.
func TestDrillCompleteThroughASwitchoverIsRecordedOnThePromotedReplica(t *testing.T) {
	const keys = 24
	ctx := context.Background()
	set := redistest.StartSentinelReplicas(t, 2)
	old, err := set.Primary()
	if err != nil {
		t.Fatal(err)
	}
	rdb := set.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{
		CallTimeout: time.Second, CompleteTimeout: 20 * time.Second,
		WaitReplicas: 2, WaitTimeout: 100 * time.Millisecond,
	})
	tokens := make([]idempotency.Token, keys)
	for i := range keys {
		tokens[i] = reserveReplicated(t, s, fmt.Sprint("order-", i))
	}

	failed := make(chan error, 1)
	go func() { failed <- set.Failover() }()
	errs := make([]error, keys)
	took := make([]time.Duration, keys)
	var wg sync.WaitGroup
	for i := range keys {
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() {
			start := time.Now()
			resp := &idempotency.Response{Status: 201, Body: []byte(fmt.Sprint("charge ", i))}
			errs[i] = s.Complete(ctx, fmt.Sprint("order-", i), tokens[i], resp, time.Minute)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	promoted, err := set.Primary()
	if err != nil || promoted == old {
		t.Fatalf("primary after the failover = %v, %v; want another than %s", promoted, err, old.Addr())
	}
	resent := 0
	for i := range keys {
		if errs[i] != nil {
			t.Errorf("Complete of order-%d during the failover = %v after %v; want nil (resent until the promoted replica recorded it)",
				i, errs[i], took[i].Round(time.Millisecond))
		}
		if took[i] > time.Second {
			resent++
		}
	}
	t.Logf("%d of %d Completes took longer than CallTimeout (1s): sent again across the switchover", resent, keys)

	// Read the new primary directly: every record completed.
	direct := promoted.Client(t)
	for i := range keys {
		st, err := direct.HGet(ctx, s.keys(fmt.Sprint("order-", i))[0], "st").Result()
		if err != nil || st != "c" {
			t.Errorf("order-%d on the promoted replica: state %q, %v; want %q (completed); "+
				"a reservation left there is taken over once its lock expires and the order charged again", i, st, err, "c")
		}
	}
}

// A primary with one replica behind three sentinels, a store with
// WaitReplicas 1: a reservation every replica acknowledged, then the
// primary killed (SIGKILL) and its Complete sent at once, while the
// sentinels have not yet promoted the replica. Each send fails (the
// connection is refused) and the Complete is sent again until the client
// reaches the promoted replica, which records the response, and the old
// primary, restarted as its replica, acknowledges it.
func TestDrillCompleteThroughAKilledPrimaryIsRecordedOnThePromotedReplica(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{
		CallTimeout: time.Second, CompleteTimeout: 30 * time.Second,
		WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond,
	})
	r := idempotency.Reservation{Token: reserveReplicated(t, s, "order-1")}
	primary, err := set.Primary()
	if err != nil {
		t.Fatal(err)
	}
	// The Complete is sent once the primary stops answering.
	direct := primary.Client(t)
	type result struct {
		err  error
		took time.Duration
	}
	completed := make(chan result, 1)
	go func() {
		for direct.Ping(ctx).Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		err := s.Complete(ctx, "order-1", r.Token, &idempotency.Response{Status: 201, Body: []byte("charged")}, time.Minute)
		completed <- result{err, time.Since(start)}
	}()
	// Killed, then once the replica is promoted, restarted as its replica
	// (as an operator brings it back), which a WAIT can count again.
	killed, err := set.KillPrimary()
	if err != nil {
		t.Fatal(err)
	}
	killed.Restart(t)
	got := <-completed
	if got.err != nil {
		t.Fatalf("Complete after the primary was killed = %v after %v; want nil (sent again until the promoted replica recorded it)",
			got.err, got.took.Round(time.Millisecond))
	}
	took := got.took
	promoted, err := set.Primary()
	if err != nil || promoted == primary {
		t.Fatalf("primary after the kill = %v, %v; want the replica", promoted, err)
	}
	t.Logf("Complete returned after %v", took.Round(time.Millisecond))
	st, err := promoted.Client(t).HGet(ctx, s.keys("order-1")[0], "st").Result()
	if err != nil || st != "c" {
		t.Fatalf("order-1 on the promoted replica: state %q, %v; want %q (completed)", st, err, "c")
	}
}

// A Cluster of three masters with two replicas each, a store with
// WaitReplicas 2 and the default CallTimeout (1s): 24 reservations, then
// CLUSTER FAILOVER FORCE of one master's replica and the Completes sent
// one every 100ms from then on. The old master takes writes until it
// learns of the new epoch, with its other replica attached; with
// CompleteTimeout 20s every Complete returns nil and each key's current
// master replays its response: none is left reserved there.
func TestDrillCompleteThroughAClusterForcedFailoverIsRecordedOnTheNewMaster(t *testing.T) {
	const keys = 24
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 2)
	rdb := c.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{
		CallTimeout: time.Second, CompleteTimeout: 20 * time.Second,
		WaitReplicas: 2, WaitTimeout: 100 * time.Millisecond,
	})
	tokens := make([]idempotency.Token, keys)
	for i := range keys {
		tokens[i] = reserveReplicated(t, s, fmt.Sprint("order-", i))
	}
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := c.Replicas(masters[0])
	if err != nil || len(replicas) == 0 {
		t.Fatalf("replicas of %s = %v, %v", masters[0].Addr(), replicas, err)
	}

	failed := make(chan error, 1)
	go func() { failed <- c.ForceFailover(replicas[0]) }()
	errs := make([]error, keys)
	var wg sync.WaitGroup
	for i := range keys {
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() {
			resp := &idempotency.Response{Status: 201, Body: []byte(fmt.Sprint("charge ", i))}
			errs[i] = s.Complete(ctx, fmt.Sprint("order-", i), tokens[i], resp, time.Minute)
		})
	}
	wg.Wait()
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if errs[i] != nil {
			t.Errorf("Complete of order-%d during the failover = %v; want nil (resent until the new master recorded it)", i, errs[i])
		}
		r, err := s.Reserve(ctx, fmt.Sprint("order-", i), "payload", time.Minute)
		if err != nil || r.State != idempotency.StateCompleted {
			t.Errorf("order-%d after the failover: Reserve = %+v, %v; want its response replayed", i, r, err)
		}
	}
}
