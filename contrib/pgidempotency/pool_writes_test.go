package pgidempotency

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTxWritesThroughThePoolAreNotProtected holds the documented limit: a
// handler that writes through the pool instead of its transaction writes
// outside the transaction. Its first run fails (503, released); the
// transaction's row rolls back, the pool's row stays, and the retry
// writes it again: two pool rows, one transaction row.
func TestTxWritesThroughThePoolAreNotProtected(t *testing.T) {
	f := newFixture(t, Options{}, false)
	var runs atomic.Int64
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		if _, err := f.direct.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ('through-pool', 1)"); err != nil {
			dbError(w, err)
			return
		}
		if _, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ('through-tx', 1)"); err != nil {
			dbError(w, err)
			return
		}
		if runs.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}, idempotency.Options{})
	if a := post(t, srv.URL, "k-pool", order{ID: "x"}); a.status != http.StatusServiceUnavailable {
		t.Fatalf("first run: %d", a.status)
	}
	if a := post(t, srv.URL, "k-pool", order{ID: "x"}); a.status != http.StatusCreated {
		t.Fatalf("retry: %d", a.status)
	}
	if got := f.charges("through-tx"); got != 1 {
		t.Fatalf("rows written through the transaction = %d, want 1", got)
	}
	if got := f.charges("through-pool"); got != 2 {
		t.Fatalf("rows written through the pool = %d, want 2 (unprotected: kept by the failed run, written again by the retry)", got)
	}
}

// TestHandlerOwningItsTransactionRecordsItself: under the plain Handler,
// a handler that owns its transaction takes the reservation from its
// context, records its response with CompleteTx in that transaction,
// commits and says so (Claim.Recorded): its response is replayed, its
// rows are there once, and the Handler neither recorded nor released the
// key again.
func TestHandlerOwningItsTransactionRecordsItself(t *testing.T) {
	f := newFixture(t, Options{}, false)
	srv := httptestServer(t, idempotency.Handler(ownTxHandler(f.direct, f.store.Store), f.store, idempotency.Options{}))
	first := post(t, srv, "k-own", order{ID: "o-own", Amount: 3})
	if first.status != http.StatusCreated || first.header.Get(idempotency.RecordedHeader) != "" {
		t.Fatalf("first = %d %v %q", first.status, first.header, first.body)
	}
	replay := post(t, srv, "k-own", order{ID: "o-own", Amount: 3})
	if err := sameAnswer(first, replay); err != nil {
		t.Fatal(err)
	}
	if got := f.charges("o-own"); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
	if got := f.store.releases.Load(); got != 0 {
		t.Fatalf("releases = %d, want 0", got)
	}
}

// ownTxHandler is a handler that owns its transaction: the pattern the
// package documents for handlers that cannot run under a TxHandler.
func ownTxHandler(pool *pgxpool.Pool, store *Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claim, ok := idempotency.ClaimFrom(r.Context())
		if !ok {
			http.Error(w, "an Idempotency-Key is required", http.StatusBadRequest)
			return
		}
		var o order
		if err := decode(r, &o); err != nil {
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		tx, err := pool.Begin(ctx)
		if err != nil {
			dbError(w, err)
			return
		}
		defer tx.Rollback(ctx)
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO charges (order_id, amount) VALUES ($1, $2) RETURNING id", o.ID, o.Amount).Scan(&id); err != nil {
			dbError(w, err)
			return
		}
		body := fmt.Sprintf(`{"order":%q,"charge":%d}`, o.ID, id)
		resp := &idempotency.Response{Status: http.StatusCreated,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Charge-Id": {fmt.Sprint(id)}}, Body: []byte(body)}
		if err := store.CompleteTx(ctx, tx, claim.Key, claim.Token, resp, 24*time.Hour); err != nil {
			// ErrStaleToken: another request owns the key now; the
			// deferred rollback undoes the charge.
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		if err := store.CommitTx(ctx, tx); err != nil {
			if !errors.Is(err, idempotency.ErrNotCommitted) {
				// The acknowledgement was lost: the key must neither
				// be released nor recorded; its lock expires.
				claim.OutcomeUnknown()
			}
			w.Header().Set("Retry-After", "1")
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		claim.Recorded()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.Status)
		w.Write(resp.Body)
	}
}

// TestHandlerOwningItsTransactionLeavesTheLockOnALostCommitAck: a handler
// that owns its transaction and loses its COMMIT's acknowledgement says
// so (Claim.OutcomeUnknown): the Handler neither records nor releases the
// key, and the retry after the lock expired replays the committed
// charge.
func TestHandlerOwningItsTransactionLeavesTheLockOnALostCommitAck(t *testing.T) {
	f := newFixture(t, Options{}, true)
	var lost atomic.Bool
	f.proxy.Commit = func() pgtest.Fate {
		if lost.CompareAndSwap(false, true) {
			return pgtest.LoseAnswer
		}
		return pgtest.Deliver
	}
	srv := httptestServer(t, idempotency.Handler(ownTxHandler(f.store.Store.pool, f.store.Store), f.store, idempotency.Options{LockTTL: 500 * time.Millisecond}))
	first := post(t, srv, "k-own-lost", order{ID: "o-own-lost", Amount: 3})
	if first.status != http.StatusServiceUnavailable || first.header.Get(idempotency.RecordedHeader) != "false" {
		t.Fatalf("first = %d %v %q, want 503 not recorded", first.status, first.header, first.body)
	}
	if got := f.store.releases.Load(); got != 0 {
		t.Fatalf("releases after a lost acknowledgement = %d, want 0", got)
	}
	var a answer
	waitFor(t, 20*time.Second, "never answered 201", func() bool {
		a = post(t, srv, "k-own-lost", order{ID: "o-own-lost", Amount: 3})
		return a.status == http.StatusCreated
	})
	if a.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("the committed charge was not replayed: %v %q", a.header, a.body)
	}
	if got := f.charges("o-own-lost"); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
}

// TestTxHandlersTransactionRefusesCommitAndRollback: the transaction a
// TxHandler gives its handler refuses Commit and Rollback
// (ErrTxOwnedByHandler), so a handler cannot commit its rows before its
// response is recorded; the TxHandler commits rows and record together.
func TestTxHandlersTransactionRefusesCommitAndRollback(t *testing.T) {
	f := newFixture(t, Options{}, false)
	var commitErr, rollbackErr error
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		if _, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ('o-refuse', 1)"); err != nil {
			dbError(w, err)
			return
		}
		commitErr = tx.Commit(r.Context())
		rollbackErr = tx.Rollback(r.Context())
		w.WriteHeader(http.StatusCreated)
	}, idempotency.Options{})
	if a := post(t, srv.URL, "k-refuse", order{ID: "o-refuse"}); a.status != http.StatusCreated {
		t.Fatalf("answer = %d %q", a.status, a.body)
	}
	if !errors.Is(commitErr, ErrTxOwnedByHandler) || !errors.Is(rollbackErr, ErrTxOwnedByHandler) {
		t.Fatalf("Commit = %v, Rollback = %v; want ErrTxOwnedByHandler", commitErr, rollbackErr)
	}
	if got := f.charges("o-refuse"); got != 1 {
		t.Fatalf("charges = %d, want 1 (committed by the TxHandler with the record)", got)
	}
	if _, done := f.records(); done != 1 {
		t.Fatalf("completed records = %d, want 1", done)
	}
}
