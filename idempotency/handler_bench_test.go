package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// benchmarkHandler serves b.N requests in memory through the middleware;
// key(i) names the key of request i.
func benchmarkHandler(b *testing.B, key func(i int) string) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"o-1","item":"book"}`)
	})
	// More new keys than the store holds: let it evict the oldest
	// responses, or it refuses the keys past its bound with 503.
	store := idempotency.NewMemoryStore(idempotency.MemoryOptions{EvictResponses: true})
	h := idempotency.Handler(next, store, idempotency.Options{})
	body := `{"item":"book"}`
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		if k := key(i); k != "" {
			req.Header.Set(idempotency.KeyHeader, k)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// BenchmarkHandlerNoKey: a POST without a key passes through.
func BenchmarkHandlerNoKey(b *testing.B) {
	benchmarkHandler(b, func(int) string { return "" })
}

// BenchmarkHandlerExecute: every request has a new key, so the handler
// runs and its response is recorded.
func BenchmarkHandlerExecute(b *testing.B) {
	benchmarkHandler(b, func(i int) string { return "key-" + strconv.Itoa(i) })
}

// BenchmarkHandlerReplay: every request repeats one key and is answered
// from the store.
func BenchmarkHandlerReplay(b *testing.B) {
	benchmarkHandler(b, func(int) string { return "key" })
}
