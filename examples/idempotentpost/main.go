// Command idempotentpost shows a POST made safe to retry with an
// Idempotency-Key, and why the key must be the same on every attempt.
//
// The caller generates the key once, with [httpretry.RandomKey], and sets it
// on the request; [httpretry.IsIdempotent] then lets the Transport retry the
// POST. The local orders server deduplicates by key. It simulates a lost
// response: the first time it sees a key it creates the order, stores it
// under the key, and still answers 503, as if the reply had been lost on
// the way back. The Transport retries with the same key, and the server
// answers with the order it already created instead of creating a second.
//
// The caller then submits once more with the same key (a user pressing
// "Buy" twice, say) and again gets the same order. Three requests reach
// the server; one order exists.
//
//	go run ./examples/idempotentpost
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/httpretry/httpretry"
)

// Order is an order as the server stores and returns it.
type Order struct {
	ID   string `json:"id"`
	Item string `json:"item"`
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "idempotentpost:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	orders := &orderServer{log: w, byKey: make(map[string]Order)}
	srv := httptest.NewServer(orders)
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{
		BaseDelay: 50 * time.Millisecond,
		Timeout:   2 * time.Second,
	}}
	defer client.CloseIdleConnections()

	// One key for one logical order, generated once and reused.
	key := httpretry.RandomKey()
	for i, what := range []string{"place the order", "submit it again with the same key"} {
		fmt.Fprintf(w, "client: %s\n", what)
		o, outcome, err := createOrder(client, srv.URL, key, `{"item":"espresso machine"}`)
		if err != nil {
			return fmt.Errorf("call %d: %w", i+1, err)
		}
		fmt.Fprintf(w, "client: got order %s (%s): attempts=%d reason=%s\n",
			o.ID, o.Item, outcome.Attempts, outcome.Reason)
	}
	fmt.Fprintf(w, "server: %d requests received, %d order(s) created\n", orders.requestCount(), orders.createdCount())
	return nil
}

// createOrder POSTs an order with the given Idempotency-Key.
func createOrder(client *http.Client, baseURL, key, body string) (Order, httpretry.Outcome, error) {
	var outcome httpretry.Outcome
	ctx := httpretry.WithOutcome(context.Background(), &outcome)
	// A strings.Reader gives the request a GetBody, so the Transport can
	// send the body again.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/orders", strings.NewReader(body))
	if err != nil {
		return Order{}, outcome, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpretry.IdempotencyKeyHeader, key)
	resp, err := client.Do(req)
	if err != nil {
		return Order{}, outcome, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return Order{}, outcome, fmt.Errorf("unexpected status %s", resp.Status)
	}
	var o Order
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return Order{}, outcome, err
	}
	return o, outcome, nil
}

// orderServer creates orders, deduplicating by Idempotency-Key, and loses
// the response to the first request of every key.
type orderServer struct {
	log io.Writer

	mu       sync.Mutex // protects the fields below
	byKey    map[string]Order
	requests int
	created  int
}

func (s *orderServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/orders" {
		http.NotFound(rw, r)
		return
	}
	key := r.Header.Get(httpretry.IdempotencyKeyHeader)
	if key == "" {
		http.Error(rw, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	var in struct {
		Item string `json:"item"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(rw, "bad order", http.StatusBadRequest)
		return
	}

	s.mu.Lock()
	s.requests++
	n := s.requests
	o, replay := s.byKey[key]
	if !replay {
		s.created++
		o = Order{ID: "ord-" + strconv.Itoa(s.created), Item: in.Item}
		s.byKey[key] = o
	}
	s.mu.Unlock()

	// Only a prefix of the key: enough to see it is the same one.
	short := key[:min(8, len(key))]
	if !replay {
		fmt.Fprintf(s.log, "server: request %d, key %s…: created %s, then the response is lost (503)\n", n, short, o.ID)
		http.Error(rw, "response lost", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(s.log, "server: request %d, key %s…: already have %s, replaying it (201)\n", n, short, o.ID)
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(rw).Encode(o)
}

func (s *orderServer) requestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *orderServer) createdCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}
