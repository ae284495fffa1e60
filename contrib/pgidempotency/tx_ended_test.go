package pgidempotency

import (
	"net/http"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
)

// TestTxEndedByTheHandlersOwnStatementIsNeverRecorded: a handler that
// ends the TxHandler's transaction with a statement of its own — COMMIT
// (its rows then stand without the record, and a crash before the record
// would charge again) or ROLLBACK (its rows are gone, yet it answers
// 201) — gets its response recorded outside any transaction of its rows:
// the record would say "charged" of a charge undone, or stand apart from
// the charge it names. CompleteTx refuses a transaction no longer open:
// nothing is recorded, and the client gets no 2xx.
func TestTxEndedByTheHandlersOwnStatementIsNeverRecorded(t *testing.T) {
	for _, end := range []string{"COMMIT", "ROLLBACK"} {
		t.Run(end, func(t *testing.T) {
			f := newFixture(t, Options{}, false)
			srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
				if _, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ('o-end', 1)"); err != nil {
					dbError(w, err)
					return
				}
				if _, err := tx.Exec(r.Context(), end); err != nil {
					dbError(w, err)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}, idempotency.Options{})
			a := post(t, srv.URL, "k-end", order{ID: "o-end"})
			if a.status/100 == 2 {
				t.Fatalf("answer = %d: a response recorded outside its rows' transaction", a.status)
			}
			if _, done := f.records(); done != 0 {
				t.Fatalf("completed records = %d, want 0", done)
			}
			if got := f.store.completes.Load(); got != 1 {
				t.Fatalf("CompleteTx calls = %d, want 1", got)
			}
		})
	}
}
