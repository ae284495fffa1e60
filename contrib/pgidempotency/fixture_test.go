package pgidempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// countedStore is a Store whose calls are counted, with hooks around the
// commit: what the middleware did, seen from the store's side.
type countedStore struct {
	*Store
	releases, completes, commits atomic.Int64
	// beforeCommit and afterCommit, if set, run around CommitTx.
	beforeCommit, afterCommit func()
}

func (s *countedStore) Release(ctx context.Context, key string, token idempotency.Token) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, key, token)
}

func (s *countedStore) CompleteTx(ctx context.Context, tx pgx.Tx, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	s.completes.Add(1)
	return s.Store.CompleteTx(ctx, tx, key, token, resp, ttl)
}

func (s *countedStore) CommitTx(ctx context.Context, tx pgx.Tx) error {
	s.commits.Add(1)
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	err := s.Store.CommitTx(ctx, tx)
	if s.afterCommit != nil {
		s.afterCommit()
	}
	return err
}

// fixture is a database with the store's table and a charges table, a
// pool straight to it for the test's own checks, and the store under test
// on its own pool (through a proxy, for the tests that lose messages).
type fixture struct {
	t      *testing.T
	db     string
	direct *pgxpool.Pool
	store  *countedStore
	proxy  *pgtest.Proxy
}

const chargesSchema = `CREATE TABLE charges (
	id       bigserial PRIMARY KEY,
	order_id text NOT NULL,
	amount   integer NOT NULL
)`

// newFixture creates the database; proxied puts a pgtest.Proxy between
// the store's pool and the server.
func newFixture(t *testing.T, opts Options, proxied bool, configure ...func(*pgxpool.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, db: newDB(t)}
	f.direct = newPool(t, server.Port, f.db)
	migratedStore(t, f.direct, opts)
	if _, err := f.direct.Exec(context.Background(), chargesSchema); err != nil {
		t.Fatal(err)
	}
	port := server.Port
	if proxied {
		p, err := pgtest.StartProxy(fmt.Sprintf("127.0.0.1:%d", server.Port))
		if err != nil {
			t.Fatal(err)
		}
		f.proxy = p
		port = p.Port
	}
	pool := newPool(t, port, f.db, configure...)
	if f.proxy != nil {
		t.Cleanup(f.proxy.Close) // after the pool closes: cleanups run last first
	}
	s, err := New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.store = &countedStore{Store: s}
	return f
}

// charges returns how many charges order has.
func (f *fixture) charges(order string) int {
	f.t.Helper()
	var n int
	if err := f.direct.QueryRow(context.Background(), "SELECT count(*) FROM charges WHERE order_id = $1", order).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// records returns how many records the store holds, and how many of them
// are completed.
func (f *fixture) records() (all, completed int) {
	f.t.Helper()
	if err := f.direct.QueryRow(context.Background(),
		"SELECT count(*), count(*) FILTER (WHERE completed) FROM "+DefaultTable).Scan(&all, &completed); err != nil {
		f.t.Fatal(err)
	}
	return all, completed
}

// order is the request body of the charge handler.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// chargeHandler charges an order: one row in charges, through the
// TxHandler's transaction, and a 201 whose body names the charge's id.
// Errors of the database answer 503 (a conflict another run may not
// meet) or 500.
func chargeHandler(w http.ResponseWriter, r *http.Request) {
	tx, ok := idempotency.TxFrom[pgx.Tx](r.Context())
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	var o order
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.ID == "" {
		http.Error(w, "bad order", http.StatusBadRequest)
		return
	}
	var id int64
	err := tx.QueryRow(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, $2) RETURNING id", o.ID, o.Amount).Scan(&id)
	if err != nil {
		dbError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Charge-Id", fmt.Sprint(id))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"order":%q,"charge":%d,"amount":%d}`, o.ID, id, o.Amount)
}

// dbError answers a database error: 503 with Retry-After for a conflict
// a new run may not meet, 500 otherwise. Both are released.
func dbError(w http.ResponseWriter, err error) {
	if Retryable(err) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "conflict, try again", http.StatusServiceUnavailable)
		return
	}
	http.Error(w, "database error", http.StatusInternalServerError)
}

// serve starts an HTTP server running h under a TxHandler over the
// fixture's store.
func (f *fixture) serve(h http.HandlerFunc, opts idempotency.Options) *httptest.Server {
	f.t.Helper()
	srv := httptest.NewServer(idempotency.TxHandler(h, f.store, opts))
	f.t.Cleanup(srv.Close)
	return srv
}

// answer is a response as a client read it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post sends one keyed POST of o and reads the whole answer.
func post(t *testing.T, url, key string, o order) answer {
	t.Helper()
	a, err := tryPost(context.Background(), url, key, o)
	if err != nil {
		t.Fatalf("POST %s: %v", key, err)
	}
	return a
}

func tryPost(ctx context.Context, url, key string, o order) (answer, error) {
	body, _ := json.Marshal(o)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// waitFor polls cond every 20 ms for up to d (the database's clock decides
// when a lock expires, so the test waits in real time) and fails the test
// with what if it never holds.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameAnswer reports how a replay differs from the first answer: status,
// body and the handler's headers must be equal byte for byte.
func sameAnswer(first, replay answer) error {
	if first.status != replay.status || !bytes.Equal(first.body, replay.body) {
		return fmt.Errorf("replay %d %q, first %d %q", replay.status, replay.body, first.status, first.body)
	}
	for _, k := range []string{"Content-Type", "X-Charge-Id"} {
		if first.header.Get(k) != replay.header.Get(k) {
			return fmt.Errorf("replay's %s %q, first's %q", k, replay.header.Get(k), first.header.Get(k))
		}
	}
	if replay.header.Get(idempotency.ReplayedHeader) != "true" {
		return errors.New("replay without Idempotent-Replayed: true")
	}
	return nil
}

func decode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// httptestServer serves h and returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
