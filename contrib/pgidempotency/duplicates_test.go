package pgidempotency

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
)

// TestTxConcurrentDuplicatesThroughTakeoversChargeOnce: for each of
// several orders, twelve duplicates race on one key while the first two
// runs of every key stall, their charge written, until a duplicate took
// the key over (or the sweeper deleted its expired record and a duplicate
// reserved it again), so that two runs of one order hold a charge at once, and a sweeper
// deletes expired records without pause. Each client retries its 409s
// and 503s until it gets a 2xx. Under READ COMMITTED and SERIALIZABLE
// alike: every order is charged exactly once, every 2xx a client got for
// it is the same bytes, and its replay is those bytes.
func TestTxConcurrentDuplicatesThroughTakeoversChargeOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real lock expiries")
	}
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			const (
				orders     = 6
				duplicates = 12
				lockTTL    = 150 * time.Millisecond
			)
			f := newFixture(t, Options{TxOptions: pgx.TxOptions{IsoLevel: iso}, AbandonedTTL: time.Millisecond}, false)
			var runs sync.Map // order id → *atomic.Int64
			var fenced atomic.Int64
			srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
				var o order
				if err := decode(r, &o); err != nil {
					http.Error(w, "bad order", http.StatusBadRequest)
					return
				}
				n, _ := runs.LoadOrStore(o.ID, new(atomic.Int64))
				run := n.(*atomic.Int64).Add(1)
				tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
				var id int64
				if err := tx.QueryRow(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, $2) RETURNING id", o.ID, o.Amount).Scan(&id); err != nil {
					dbError(w, err)
					return
				}
				if run <= 2 {
					// Stalls, its row written, until its key is taken over
					// (or swept and reserved again): a duplicate then runs
					// beside it.
					claim, _ := idempotency.ClaimFrom(r.Context())
					waitFor(t, 30*time.Second, "the stalled run's key was never taken over", func() bool {
						var held bool
						err := f.direct.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM "+DefaultTable+" WHERE token = $1)", int64(claim.Token)).Scan(&held)
						return err == nil && !held
					})
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, `{"order":%q,"charge":%d}`, o.ID, id)
			}, idempotency.Options{LockTTL: lockTTL, OnEvent: func(e idempotency.Event) {
				if e.Kind == idempotency.KindFenced {
					fenced.Add(1)
				}
			}})

			ctx, cancel := context.WithCancel(context.Background())
			sweeps := make(chan struct{})
			go func() {
				defer close(sweeps)
				for ctx.Err() == nil {
					_, _ = f.store.Sweep(ctx, 100)
					time.Sleep(time.Millisecond)
				}
			}()
			var mu sync.Mutex
			got := map[string]map[string]int{} // order → 2xx body → count
			var wg sync.WaitGroup
			for i := range orders {
				o := order{ID: fmt.Sprintf("o-%d", i), Amount: 100 + i}
				key := fmt.Sprintf("key-%d", i)
				for range duplicates {
					wg.Go(func() {
						deadline := time.Now().Add(60 * time.Second)
						for time.Now().Before(deadline) {
							a, err := tryPost(context.Background(), srv.URL, key, o)
							if err == nil && a.status/100 == 2 {
								mu.Lock()
								if got[o.ID] == nil {
									got[o.ID] = map[string]int{}
								}
								got[o.ID][string(a.body)]++
								mu.Unlock()
								return
							}
							if err == nil && a.status != http.StatusConflict && a.status != http.StatusServiceUnavailable {
								t.Errorf("%s: %d %s", o.ID, a.status, a.body)
								return
							}
							time.Sleep(10 * time.Millisecond)
						}
						t.Errorf("%s: no 2xx within a minute", o.ID)
					})
				}
			}
			wg.Wait()
			cancel()
			<-sweeps
			if n := fenced.Load(); n < 2*orders {
				t.Errorf("fenced runs = %d, want at least %d (the two stalled runs of each order; a run slower than its lock may be fenced too)", n, 2*orders)
			}
			for i := range orders {
				id := fmt.Sprintf("o-%d", i)
				if n := f.charges(id); n != 1 {
					t.Errorf("%s charged %d times, want 1", id, n)
				}
				if len(got[id]) != 1 {
					t.Errorf("%s: the clients got %d different 2xx bodies, want 1: %v", id, len(got[id]), got[id])
					continue
				}
				replay := post(t, srv.URL, fmt.Sprintf("key-%d", i), order{ID: id, Amount: 100 + i})
				for body := range got[id] {
					if string(replay.body) != body || replay.header.Get(idempotency.ReplayedHeader) != "true" {
						t.Errorf("%s: replay %d %q, the clients got %q", id, replay.status, replay.body, body)
					}
				}
			}
		})
	}
}
