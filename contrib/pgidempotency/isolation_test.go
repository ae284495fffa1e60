package pgidempotency

import (
	"testing"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestStoreOnADatabaseDefaultingToSerializable: on a database whose
// default isolation is SERIALIZABLE, the store's own statements run
// serializable too; a Reserve that meets a record a concurrent Reserve
// inserted after its snapshot fails there with 40001 instead of seeing
// it, and is run again. The contract's suite passes, concurrent reserves
// included.
func TestStoreOnADatabaseDefaultingToSerializable(t *testing.T) {
	needServer(t)
	db := newDB(t)
	direct := newPool(t, server.Port, db)
	if _, err := direct.Exec(t.Context(), "ALTER DATABASE "+db+" SET default_transaction_isolation = 'serializable'"); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, server.Port, db, func(c *pgxpool.Config) { c.MaxConns = 32 })
	s := migratedStore(t, pool, Options{})
	var level string
	if err := pool.QueryRow(t.Context(), "SHOW transaction_isolation").Scan(&level); err != nil || level != "serializable" {
		t.Fatalf("isolation = %q, %v; want serializable", level, err)
	}
	for range 5 {
		storetest.Run(t, func(t *testing.T) idempotency.Store { return s })
	}
}
