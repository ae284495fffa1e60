package pgidempotency

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReserveOfARecordHeldByAStalledTransactionAnswersInProgress: an
// instance paused (or partitioned) after its CompleteTx and before its
// COMMIT keeps the key's record locked until its transaction ends. The
// duplicates of that key that other instances receive meanwhile are in
// progress, and Reserve says so at once, instead of each waiting for the
// lock with a connection of the pool: eight of them on a pool of four
// would hold every connection until the store's Timeout, and a request
// for another key, on the same pool, would fail.
func TestReserveOfARecordHeldByAStalledTransactionAnswersInProgress(t *testing.T) {
	const timeout = 5 * time.Second
	f := newFixture(t, Options{Timeout: timeout}, false, func(c *pgxpool.Config) { c.MaxConns = 4 })
	ctx := context.Background()
	held, err := f.store.Reserve(ctx, "k-held", "fp", time.Millisecond)
	if err != nil || held.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %v, %v", held.State, err)
	}
	// The stalled instance: CompleteTx done, COMMIT never sent.
	tx, err := f.store.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer f.store.RollbackTx(ctx, tx)
	if err := f.store.CompleteTx(ctx, tx, "k-held", held.Token, &idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // its lock expires: a duplicate would take it over
	var wg sync.WaitGroup
	states := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			res, err := f.store.Reserve(ctx, "k-held", "fp", time.Minute)
			states <- fmt.Sprint(res.State, err)
		})
	}
	start := time.Now()
	other, err := f.store.Reserve(ctx, "k-other", "fp", time.Minute)
	if err != nil || other.State != idempotency.StateReserved {
		t.Fatalf("another key's Reserve beside them = %v, %v (after %v); want reserved", other.State, err, time.Since(start))
	}
	wg.Wait()
	close(states)
	for s := range states {
		if s != fmt.Sprint(idempotency.StateInProgress, nil) {
			t.Fatalf("a duplicate's Reserve = %s, want in progress", s)
		}
	}
}
