package pgidempotency

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// TestNewRejectsInvalidTablesAndNoPool: a table name that would need
// quoting (or could inject SQL) is ErrInvalidTable, from New and from
// Schema, and a nil pool an error; a schema-qualified name is accepted.
func TestNewRejectsInvalidTablesAndNoPool(t *testing.T) {
	for _, name := range []string{"Records", "records; DROP TABLE x", "a.b.c", "1records", `"q"`, strings.Repeat("a", 60)} {
		if _, err := Schema(name); !errors.Is(err, ErrInvalidTable) {
			t.Errorf("Schema(%q) = %v, want ErrInvalidTable", name, err)
		}
	}
	sql, err := Schema("billing.idem")
	if err != nil || !strings.Contains(sql, "CREATE TABLE IF NOT EXISTS billing.idem (") || !strings.Contains(sql, "billing.idem_tokens") {
		t.Fatalf("Schema(billing.idem) = %v\n%s", err, sql)
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("New(nil) accepted")
	}
}

// TestMigrateConcurrentlyFromManyInstances: instances starting together
// each run Migrate; all succeed, and the table works.
func TestMigrateConcurrentlyFromManyInstances(t *testing.T) {
	needServer(t)
	pool := newPool(t, server.Port, newDB(t))
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			s, err := New(pool, Options{Table: "public.idem"})
			if err == nil {
				err = s.Migrate(context.Background())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	s, _ := New(pool, Options{Table: "public.idem"})
	if r, err := s.Reserve(context.Background(), "k", "fp", time.Second); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
}

// TestTxKeysOfTwoTenantsAreTwoOperations: with KeyScope, one key from two
// accounts is two charges, and each account is replayed its own
// response, never the other's.
func TestTxKeysOfTwoTenantsAreTwoOperations(t *testing.T) {
	f := newFixture(t, Options{}, false)
	h := idempotency.TxHandler(http.HandlerFunc(chargeHandler), f.store, idempotency.Options{
		KeyScope: func(r *http.Request) string { return r.Header.Get("X-Account") },
	})
	srv := httptestServer(t, h)
	send := func(account string) answer {
		req, _ := http.NewRequest(http.MethodPost, srv, jsonBody(order{ID: "o-" + account, Amount: 1}))
		req.Header.Set("Idempotency-Key", "same-key")
		req.Header.Set("X-Account", account)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, header: resp.Header, body: b}
	}
	a, b := send("acct-a"), send("acct-b")
	if a.status != 201 || b.status != 201 || string(a.body) == string(b.body) {
		t.Fatalf("two accounts, one key: %d %q and %d %q", a.status, a.body, b.status, b.body)
	}
	if ra := send("acct-a"); string(ra.body) != string(a.body) || ra.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("account a replayed %q, want its own %q", ra.body, a.body)
	}
	if f.charges("o-acct-a") != 1 || f.charges("o-acct-b") != 1 {
		t.Fatalf("charges a=%d b=%d, want 1 each", f.charges("o-acct-a"), f.charges("o-acct-b"))
	}
}
