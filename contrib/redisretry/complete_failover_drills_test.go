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
		r, err := s.Reserve(ctx, fmt.Sprint("order-", i), "payload", time.Minute)
		if err != nil || r.State != idempotency.StateReserved {
			t.Fatalf("Reserve before the failover = %+v, %v; want reserved", r, err)
		}
		tokens[i] = r.Token
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
