package pgidempotency

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// startBouncer starts PgBouncer in transaction pooling mode in front of
// db: four server connections shared by every client transaction, no
// session state kept between transactions (PgBouncer 1.18 has no
// prepared-statement support in this mode: a named statement fails).
func startBouncer(t *testing.T, db string) *pgtest.Bouncer {
	t.Helper()
	b, err := server.StartBouncer(db)
	if errors.Is(err, pgtest.ErrNoBouncer) && !pgtest.Required() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

// TestStoreWorksBehindTransactionPooling: through PgBouncer with
// pool_mode=transaction, the store passes the Store contract's suite,
// and ten concurrent duplicates of a keyed charge through a TxHandler
// charge once: the store depends on no session state (advisory locks,
// named prepared statements).
func TestStoreWorksBehindTransactionPooling(t *testing.T) {
	needServer(t)
	db := newDB(t)
	direct := newPool(t, server.Port, db)
	migratedStore(t, direct, Options{})
	if _, err := direct.Exec(t.Context(), chargesSchema); err != nil {
		t.Fatal(err)
	}
	b := startBouncer(t, db)
	pooled := newPool(t, b.Port, db, func(c *pgxpool.Config) { c.MaxConns = 20 })
	s, err := New(pooled, Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) idempotency.Store { return s })

	f := &fixture{t: t, db: db, direct: direct, store: &countedStore{Store: s}}
	srv := f.serve(chargeHandler, idempotency.Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	bodies := map[string]int{}
	for range 10 {
		wg.Go(func() {
			a := post(t, srv.URL, "k-bouncer", order{ID: "o-bouncer", Amount: 7})
			mu.Lock()
			defer mu.Unlock()
			if a.status == http.StatusCreated {
				bodies[string(a.body)]++
			} else if a.status != http.StatusConflict {
				t.Errorf("duplicate answered %d %q", a.status, a.body)
			}
		})
	}
	wg.Wait()
	if got := f.charges("o-bouncer"); got != 1 {
		t.Fatalf("charges through PgBouncer = %d, want 1", got)
	}
	if len(bodies) > 1 {
		t.Fatalf("duplicates got different 201 bodies: %v", bodies)
	}
}

// TestBouncerStopLeavesNothingListening: the test harness's PgBouncer
// ends with Stop: its port no longer accepts connections (a PgBouncer
// started through runuser used to outlive its test).
func TestBouncerStopLeavesNothingListening(t *testing.T) {
	needServer(t)
	b, err := server.StartBouncer(newDB(t))
	if errors.Is(err, pgtest.ErrNoBouncer) && !pgtest.Required() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.Stop()
	waitFor(t, 5*time.Second, "PgBouncer still accepts connections after Stop", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}
