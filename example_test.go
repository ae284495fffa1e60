package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
)

// noJitter makes the examples' waits zero, so that they run fast and print
// the same thing every time.
func noJitter(time.Duration) time.Duration { return 0 }

// The one-line drop-in: wrap the client's existing Transport. Here the
// server fails the first request with 503 and answers the second.
func Example() {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Timeout: 2 * time.Second}
	client.Transport = &httpretry.Transport{Base: client.Transport, Jitter: noJitter}
	defer client.CloseIdleConnections()

	var o httpretry.Outcome
	req, _ := http.NewRequestWithContext(httpretry.WithOutcome(context.Background(), &o), http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(string(body))
	fmt.Println("attempts:", o.Attempts)
	// Output:
	// 200 OK
	// hello
	// attempts: 2
}

// A POST is retried only when it carries an idempotency key. With
// NewIdempotencyKey set, the Transport adds one per operation and sends the
// same key on every attempt, so that a server that deduplicates by it
// applies the request once.
func ExampleTransport_idempotencyKey() {
	var (
		mu   sync.Mutex
		keys []string // guarded by mu
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(httpretry.IdempotencyKeyHeader))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	t := &httpretry.Transport{NewIdempotencyKey: httpretry.RandomKey, Jitter: noJitter}
	defer t.CloseIdleConnections()
	client := &http.Client{Transport: t}

	resp, err := client.Post(srv.URL+"/payments", "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	fmt.Println(resp.Status)
	fmt.Println("attempts:", len(keys))
	fmt.Println("same key on every attempt:", keys[0] != "" && keys[0] == keys[1])
	// Output:
	// 201 Created
	// attempts: 2
	// same key on every attempt: true
}

// WithOutcome reports what the Transport did for one request: here, three
// attempts against a server that never recovers, and the last 503 returned.
func ExampleWithOutcome() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	t := &httpretry.Transport{Jitter: noJitter}
	defer t.CloseIdleConnections()
	client := &http.Client{Transport: t}

	var o httpretry.Outcome
	ctx := httpretry.WithOutcome(context.Background(), &o)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode)
	fmt.Println("attempts:", o.Attempts)
	fmt.Println("reason:", o.Reason)
	// Output:
	// status: 503
	// attempts: 3
	// reason: attempts_exhausted
}

func ExampleParseRetryAfter() {
	now := time.Date(2015, time.October, 21, 7, 28, 0, 0, time.UTC)
	for _, v := range []string{
		"120",                           // delay-seconds
		"Wed, 21 Oct 2015 07:28:30 GMT", // an HTTP-date, 30s after now
		"Wed, 21 Oct 2015 07:00:00 GMT", // a date in the past
		"2.0",                           // delay-seconds with a fraction, as Shopify sends it
		"soon",                          // malformed: the caller's own backoff applies
	} {
		h := http.Header{"Retry-After": {v}}
		d, ok := httpretry.ParseRetryAfter(h, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s true
	// 2s true
	// 0s false
}

func ExampleNewTokenBucket() {
	// A burst of two retries, then one retry for every ten operations.
	b := httpretry.NewTokenBucket(2, 0.1)
	fmt.Println(b.Withdraw(context.Background()), b.Withdraw(context.Background()), b.Withdraw(context.Background()))
	for range 10 {
		b.Deposit()
	}
	fmt.Println(b.Withdraw(context.Background()))
	// Output:
	// true true false
	// true
}

// A POST without an idempotency key whose connection breaks after it was
// sent is not retried: the server may have applied it. The error matches
// ErrOutcomeUnknown, through the *url.Error http.Client wraps it in.
func ExampleError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request, then drop the connection without a response.
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	}))
	defer srv.Close()

	t := &httpretry.Transport{Jitter: noJitter}
	defer t.CloseIdleConnections()
	client := &http.Client{Transport: t}

	_, err := client.Post(srv.URL+"/transfers", "application/json", strings.NewReader(`{"amount":100}`))
	fmt.Println("outcome unknown:", errors.Is(err, httpretry.ErrOutcomeUnknown))
	var e *httpretry.Error
	if errors.As(err, &e) {
		fmt.Println("method:", e.Method)
		fmt.Println("attempts:", e.Attempts)
		fmt.Println("reason:", e.Reason)
	}
	// Output:
	// outcome unknown: true
	// method: POST
	// attempts: 1
	// reason: not_idempotent
}

// A hedged read: the first attempt is stuck, so after 20ms the Transport
// sends a hedge, which answers; the stuck one is canceled before Do
// returns. (Propagate numbers the attempts for the server.)
func ExampleHedging() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(httpretry.AttemptHeader) == "1" {
			<-r.Context().Done() // stuck until the hedge wins
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Timeout: 5 * time.Second}
	client.Transport = &httpretry.Transport{
		Base:      client.Transport,
		Hedging:   &httpretry.Hedging{Delay: 20 * time.Millisecond}, // or &httpretry.Hedging{}: adaptive
		Propagate: true,
	}
	defer client.CloseIdleConnections()

	var o httpretry.Outcome
	req, _ := http.NewRequestWithContext(httpretry.WithOutcome(context.Background(), &o), http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	fmt.Printf("attempts %d, hedges %d, won by a hedge: %v, losers canceled %d\n", o.Attempts, o.Hedges, o.HedgeWon, o.LosersCanceled)
	// Output:
	// hello
	// attempts 2, hedges 1, won by a hedge: true, losers canceled 1
}
