package pgidempotency

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
)

// TestDerivedKeyDeduplicatesTheProvidersChargeAcrossRuns: the handler
// charges a payment provider through httpretry with a DerivedKey, then
// commits. The first run's COMMIT never reaches the database (lost: its
// rows roll back); after the lease the retry runs the handler again,
// which sends the provider the same derived key: the provider, itself
// deduplicating by key, charges once and replays its answer.
func TestDerivedKeyDeduplicatesTheProvidersChargeAcrossRuns(t *testing.T) {
	var providerCharges atomic.Int64
	var keysMu sync.Mutex
	keys := map[string]int{}
	charge := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := providerCharges.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "ch_%d", n)
	}), idempotency.NewMemoryStore(idempotency.MemoryOptions{}), idempotency.Options{RequireKey: true})
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keysMu.Lock()
		keys[r.Header.Get("Idempotency-Key")]++
		keysMu.Unlock()
		charge.ServeHTTP(w, r)
	}))
	t.Cleanup(provider.Close)
	client := &http.Client{Transport: &httpretry.Transport{Timeout: 5 * time.Second}}

	f := newFixture(t, Options{}, true)
	var lost atomic.Bool
	f.proxy.Commit = func() pgtest.Fate {
		if lost.CompareAndSwap(false, true) {
			return pgtest.LoseCommit
		}
		return pgtest.Deliver
	}
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		key, ok := idempotency.DerivedKey(r.Context(), "provider-charge")
		if !ok {
			http.Error(w, "no key", http.StatusInternalServerError)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, provider.URL, nil)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, "provider unreachable", http.StatusBadGateway)
			return
		}
		ref, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		if _, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, 1)", string(ref)); err != nil {
			dbError(w, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s", ref)
	}, idempotency.Options{LockTTL: 500 * time.Millisecond})

	first := post(t, srv.URL, "k-derived", order{ID: "o"})
	if first.status != http.StatusServiceUnavailable {
		t.Fatalf("first run answered %d %q, want 503 (its COMMIT was lost)", first.status, first.body)
	}
	var a answer
	waitFor(t, 20*time.Second, "the retry never ran", func() bool {
		a = post(t, srv.URL, "k-derived", order{ID: "o"})
		return a.status == http.StatusCreated
	})
	if string(a.body) != "ch_1" {
		t.Fatalf("the retry's answer = %q, want the provider's first charge, ch_1", a.body)
	}
	if got := providerCharges.Load(); got != 1 {
		t.Fatalf("the provider charged %d times, want 1", got)
	}
	keysMu.Lock()
	defer keysMu.Unlock()
	if len(keys) != 1 {
		t.Fatalf("the two runs sent %d different keys, want one: %v", len(keys), keys)
	}
	for k, n := range keys {
		if n != 2 || len(k) != 64 {
			t.Fatalf("key %q sent %d times, want 2 (one per run) and 64 hex digits", k, n)
		}
	}
	if got := f.charges("ch_1"); got != 1 {
		t.Fatalf("charge rows = %d, want 1", got)
	}
}
