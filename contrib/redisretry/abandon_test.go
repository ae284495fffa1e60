package redisretry

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// runReserve runs the reserve script as Reserve sends it, under keys.
func runReserve(t *testing.T, s *IdempotencyStore, keys []string, lockTTL time.Duration) []any {
	t.Helper()
	res, err := reserveScript.Run(context.Background(), s.rdb, keys, "fp", millis(lockTTL), millis(time.Hour), s.nonceTTL(), s.policyCheck()).Slice()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An abandon that reaches Redis before the Reserve it abandons leaves the
// call's nonce marked, and the reserve script, run after it, reserves
// nothing.
func TestAbandonedBeforeItRunsAReserveReservesNothing(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	keys := s.keys("k")
	s.abandon(keys)
	res := runReserve(t, s, keys, time.Minute)
	if err := reserveRefusal(res); err != errAbandoned {
		t.Fatalf("reserve after its abandon = %v (%v); want errAbandoned", res, err)
	}
	if n := rdb.Exists(ctx, recordKey(prefix, "k"), lockKey(prefix, "k")).Val(); n != 0 {
		t.Fatalf("%d of the key's record and lock written; want 0", n)
	}
	if r, err := s.Reserve(ctx, "k", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("next Reserve = %+v, %v; want reserved", r, err)
	}
}

// An abandon that reaches Redis after the Reserve it abandons puts back
// what the reservation replaced: a fresh key is freed; a take-over gives
// the key back to the expired reservation, whose owner can still
// complete it.
func TestAbandonedAfterItRanAReserveLeavesNoLock(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})

	keys := s.keys("fresh")
	if res := runReserve(t, s, keys, time.Minute); res[0] != int64(idempotency.StateReserved) {
		t.Fatalf("reserve = %v; want reserved", res)
	}
	s.abandon(keys)
	if n := rdb.Exists(ctx, recordKey(prefix, "fresh"), lockKey(prefix, "fresh")).Val(); n != 0 {
		t.Fatalf("%d of the abandoned key's record and lock left; want 0", n)
	}

	first, err := s.Reserve(ctx, "taken", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, lockKey(prefix, "taken")) // its lock expired
	keys = s.keys("taken")
	res := runReserve(t, s, keys, time.Minute)
	if res[0] != int64(idempotency.StateReserved) || res[2] != int64(1) {
		t.Fatalf("reserve of the expired key = %v; want a take-over", res)
	}
	s.abandon(keys)
	if got := rdb.HGet(ctx, recordKey(prefix, "taken"), "tok").Val(); got != tokenArg(first.Token) {
		t.Fatalf("token after the abandoned take-over = %q; want the first owner's %d", got, first.Token)
	}
	if rdb.Exists(ctx, lockKey(prefix, "taken")).Val() != 0 {
		t.Fatal("the abandoned take-over's lock is left")
	}
	if err := s.Complete(ctx, "taken", first.Token, &idempotency.Response{Status: 201}, time.Minute); err != nil {
		t.Fatalf("the first owner's Complete = %v; want nil", err)
	}
	// A second abandon of the same call changes nothing.
	s.abandon(keys)
	if got := rdb.HGet(ctx, recordKey(prefix, "taken"), "st").Val(); got != "c" {
		t.Fatalf("state after a second abandon = %q; want c", got)
	}
}

// A burst of Reserves on a client whose four connections cannot carry
// them: calls time out queued in Redis after they were written, and
// their abandons wait for a connection behind the rest of the burst.
// Every abandon still reaches Redis within its own bound (at least 1s,
// whatever CallTimeout), so no Reserve that failed leaves its key locked.
func TestBurstOnAFewConnectionsLeavesNoLockBehindAFailedReserve(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: 4})
	defer rdb.Close()
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: time.Millisecond})
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range 60 {
				key := fmt.Sprint("w", w, "-", i)
				if _, err := s.Reserve(ctx, key, "fp", time.Minute); err != nil {
					mu.Lock()
					failed = append(failed, key)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	check := srv.Client(t)
	if err := check.Ping(ctx).Err(); err != nil { // every command written before it has run
		t.Fatal(err)
	}
	if len(failed) == 0 {
		t.Fatal("no Reserve failed with a 1ms CallTimeout on four connections; want a burst that times out")
	}
	locked := 0
	for _, k := range failed {
		locked += int(check.Exists(ctx, lockKey(prefix, k)).Val())
	}
	if locked != 0 {
		t.Fatalf("%d of the %d keys whose Reserve failed are locked; want none", locked, len(failed))
	}
}
