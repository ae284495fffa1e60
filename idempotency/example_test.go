package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/httpretry/httpretry/idempotency"
)

func ExampleHandler() {
	created := 0
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		created++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d", created)
	})
	store := idempotency.NewMemoryStore(idempotency.MemoryOptions{})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Handler(createOrder, store, idempotency.Options{RequireKey: true}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
		if key != "" {
			req.Header.Set(idempotency.KeyHeader, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			b = []byte(resp.Header.Get("Content-Type"))
		}
		fmt.Printf("%d %s (replayed: %q)\n", resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader))
	}
	post("7c9e6679", `{"item":"book"}`)
	post("7c9e6679", `{"item":"book"}`) // a retry
	post("7c9e6679", `{"item":"lamp"}`) // the key reused for another order
	post("", `{"item":"book"}`)
	fmt.Println("orders created:", created)
	// Output:
	// 201 order 1 (replayed: "")
	// 201 order 1 (replayed: "true")
	// 422 application/problem+json (replayed: "")
	// 400 application/problem+json (replayed: "")
	// orders created: 1
}
