//go:build unix

package redisretry

import (
	"context"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// A Complete that the replica cannot acknowledge within CallTimeout (the
// replica is stopped for 1.5s against a CallTimeout of 1s) is sent again
// until CompleteTimeout, and the replica, which a failover would promote,
// ends up holding the response: a retry there is replayed it rather than
// taking the key over once its lock expires and running the operation a
// second time.
func TestCompleteIsResentUntilCompleteTimeoutSoThatTheReplicaRecordsIt(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{
		CallTimeout: time.Second, CompleteTimeout: 20 * time.Second,
		WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond,
	})
	replica, err := set.Replica()
	if err != nil {
		t.Fatal(err)
	}
	res := idempotency.Reservation{Token: reserveReplicated(t, s, "order-1")}

	replica.Freeze()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		charged := &idempotency.Response{Status: 201, Body: []byte("charged")}
		done <- s.Complete(ctx, "order-1", res.Token, charged, time.Minute)
	}()
	time.Sleep(1500 * time.Millisecond) // past CallTimeout
	replica.Thaw()
	if err := <-done; err != nil {
		t.Fatalf("Complete with the replica stopped for 1.5s, CallTimeout 1s, CompleteTimeout 20s = %v after %v; want nil "+
			"(sent again until the replica acknowledged it)", err, time.Since(start).Round(time.Millisecond))
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("Complete returned after %v, before the replica was back; want it to wait for the replica", d)
	}
	record := s.keys("order-1")[0]
	st, err := replica.Client(t).HGet(ctx, record, "st").Result()
	if err != nil || st != "c" {
		t.Fatalf("the replica's record state = %q, %v; want %q (completed): promoted, it would let a retry take the key over", st, err, "c")
	}
}
