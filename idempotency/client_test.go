package idempotency_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// retryingClient is an httpretry client that keeps trying through 409s
// for as long as the tests need: no budget, zero jitter, a generous
// deadline.
func retryingClient(t *testing.T, newKey func() string) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: &httpretry.Transport{
		Base:              base,
		MaxAttempts:       10,
		Timeout:           30 * time.Second,
		Budget:            httpretry.Unlimited,
		Jitter:            func(time.Duration) time.Duration { return 0 },
		NewIdempotencyKey: newKey,
	}}
}

func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestConcurrentDuplicatesConvergeOnOneExecution sends 50 identical POSTs
// with one Idempotency-Key at once through httpretry. The handler holds
// its first run until every duplicate has been answered 409, so they all
// overlap it: each is answered 409 with Retry-After: 1, the client waits and
// retries, and gets the replay.
func TestConcurrentDuplicatesConvergeOnOneExecution(t *testing.T) {
	const callers = 50
	var executions atomic.Int32
	proceed := newGate()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		<-proceed.wait()
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"order":"o-1","echo":`+string(body)+`}`)
	})
	ev := &events{}
	protected := idempotency.Handler(next, memory(), idempotency.Options{OnEvent: ev.add})

	// Count the distinct callers answered 409; once all but the executing
	// one have been, every duplicate has overlapped the held execution.
	var (
		mu         sync.Mutex
		conflicted = map[string]bool{}
		all        = make(chan struct{})
	)
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		protected.ServeHTTP(sw, r)
		if sw.status != http.StatusConflict {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if caller := r.Header.Get("X-Caller"); !conflicted[caller] {
			conflicted[caller] = true
			if len(conflicted) == callers-1 {
				close(all)
			}
		}
	}))

	proceed.openAtEnd(t)
	client := retryingClient(t, nil)
	key := httpretry.RandomKey()
	type answer struct {
		status   int
		body     string
		replayed string
		attempts int
		err      error
	}
	answers := make(chan answer, callers)
	for i := range callers {
		go func() {
			var o httpretry.Outcome
			ctx := httpretry.WithOutcome(context.Background(), &o)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/orders", strings.NewReader(`{"item":"book"}`))
			req.Header.Set(idempotency.KeyHeader, key)
			req.Header.Set("X-Caller", strconv.Itoa(i))
			resp, err := client.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, string(b), resp.Header.Get(idempotency.ReplayedHeader), o.Attempts, err}
		}()
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("only %d duplicates were answered 409 while the first ran, want %d", len(conflicted), callers-1)
	}
	proceed.open()

	var fresh, replayed int
	want := `{"order":"o-1","echo":{"item":"book"}}`
	for range callers {
		a := <-answers
		if a.err != nil {
			t.Fatalf("caller failed: %v", a.err)
		}
		if a.status != http.StatusCreated || a.body != want {
			t.Fatalf("caller got %d %q, want 201 %q", a.status, a.body, want)
		}
		switch a.replayed {
		case "":
			fresh++
			if a.attempts != 1 {
				t.Errorf("the executing caller made %d attempts, want 1", a.attempts)
			}
		case "true":
			replayed++
			if a.attempts < 2 {
				t.Errorf("a duplicate made %d attempts, want at least 2 (409, then the replay)", a.attempts)
			}
		}
	}
	if got := executions.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	if fresh != 1 || replayed != callers-1 {
		t.Fatalf("%d fresh and %d replayed answers, want 1 and %d", fresh, replayed, callers-1)
	}
	if got := ev.count(idempotency.KindConflict); got < callers-1 {
		t.Fatalf("%d conflicts, want at least %d", got, callers-1)
	}
	if got := ev.count(idempotency.KindReplayed); got != callers-1 {
		t.Fatalf("%d replays, want %d", got, callers-1)
	}
}

// TestLostResponseIsReplayed: the handler runs, but its response never
// reaches the client (the connection breaks). The client, which generated
// the key, retries; the retry gets the recorded response and the handler
// does not run again.
func TestLostResponseIsReplayed(t *testing.T) {
	var executions atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := executions.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "order "+strconv.Itoa(int(n)))
	})
	protected := idempotency.Handler(next, memory(), idempotency.Options{RequireKey: true})
	var requests atomic.Int32
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			// Run the operation, then lose its response.
			protected.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler)
		}
		protected.ServeHTTP(w, r)
	}))

	client := retryingClient(t, httpretry.RandomKey)
	resp, err := client.Post(url+"/orders", "text/plain", strings.NewReader("espresso machine"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || string(b) != "order 1" || resp.Header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("got %d %q (replayed %q), want the replay of order 1", resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader))
	}
	if executions.Load() != 1 || requests.Load() != 2 {
		t.Fatalf("executions = %d, requests = %d; want 1, 2", executions.Load(), requests.Load())
	}
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// TestAbandonedRequestIsNeverReplayedAsEmptySuccess: the client's attempt
// times out; the handler sees its context end and returns without
// writing, as Go handlers do. Nothing is recorded: the client's retry
// places the order (once), and never gets an empty 200 replayed.
func TestAbandonedRequestIsNeverReplayedAsEmptySuccess(t *testing.T) {
	if testing.Short() {
		t.Skip("needs 4s of real time")
	}
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2], func(t *testing.T) {
			var runs, orders atomic.Int32
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					<-r.Context().Done() // the client gave up: place nothing
					return
				}
				orders.Add(1)
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "placed")
			})
			srv, client := orderServer(t, h2, next)
			resp, err := client.Post(srv.URL+"/orders", "text/plain", strings.NewReader("1 espresso machine"))
			if err != nil {
				// Allowed, if the order was not placed twice.
				if orders.Load() > 1 {
					t.Fatalf("error %v after %d orders, want at most 1", err, orders.Load())
				}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusCreated || string(b) != "placed" {
				t.Fatalf("got %d %q (replayed %q), want 201 placed", resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader))
			}
			if orders.Load() != 1 {
				t.Fatalf("orders = %d, want 1", orders.Load())
			}
		})
	}
}

// TestBusinessConflictIsFinalThroughTheTransport: a handler's own 409 (a
// conflict in the domain) is recorded; the httpretry client takes it, and
// its replay, as final — one request each — while it still retries the
// middleware's in-progress 409 (TestConcurrentDuplicatesConvergeOnOneExecution).
func TestBusinessConflictIsFinalThroughTheTransport(t *testing.T) {
	var runs, requests atomic.Int32
	protected := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"title":"order already shipped"}`)
	}), memory(), idempotency.Options{RequireKey: true})
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		protected.ServeHTTP(w, r)
	}))
	client := retryingClient(t, nil)
	key := httpretry.RandomKey()
	for i, wantReplayed := range []string{"", "true"} {
		var o httpretry.Outcome
		req, _ := http.NewRequestWithContext(httpretry.WithOutcome(context.Background(), &o), http.MethodPost, url+"/orders/1/cancel", strings.NewReader("{}"))
		req.Header.Set(idempotency.KeyHeader, key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || string(b) != `{"title":"order already shipped"}` || resp.Header.Get(idempotency.ReplayedHeader) != wantReplayed {
			t.Fatalf("call %d: %d %q, replayed %q; want the 409, replayed %q", i, resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader), wantReplayed)
		}
		if o.Attempts != 1 {
			t.Fatalf("call %d: %d attempts, want 1 (a business 409 is final)", i, o.Attempts)
		}
	}
	if runs.Load() != 1 || requests.Load() != 2 {
		t.Fatalf("runs = %d, requests = %d; want 1, 2", runs.Load(), requests.Load())
	}
}

// TestAbandonedAfterFlushIsNeverReplayedAsEmptySuccess: a handler that
// flushes before its work (to send headers early, as long-running handlers
// do) and then sees its client give up returns without writing anything:
// it placed nothing. Only net/http's implicit 200 went out, and it is not
// recorded: the retry places the order (once) and never gets an empty 200
// replayed.
func TestAbandonedAfterFlushIsNeverReplayedAsEmptySuccess(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2], func(t *testing.T) {
			var runs, orders atomic.Int32
			returned := make(chan struct{})
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					defer close(returned)
					w.(http.Flusher).Flush()
					<-r.Context().Done() // the client gave up: place nothing
					return
				}
				orders.Add(1)
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "placed")
			})
			srv := httptest.NewUnstartedServer(idempotency.Handler(next, memory(), idempotency.Options{RequireKey: true}))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			client := srv.Client()
			t.Cleanup(func() {
				client.CloseIdleConnections()
				srv.Close()
			})
			post := func(ctx context.Context) (*http.Response, error) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader("1 espresso machine"))
				req.Header.Set(idempotency.KeyHeader, "k")
				return client.Do(req)
			}
			ctx, cancel := context.WithCancel(context.Background())
			resp, err := post(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cancel() // headers arrived; the client gives up on the rest
			resp.Body.Close()
			<-returned
			for range 500 {
				resp, err = post(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusConflict {
					time.Sleep(10 * time.Millisecond) // the first is still being recorded
					continue
				}
				if resp.StatusCode != http.StatusCreated || string(b) != "placed" || resp.Header.Get(idempotency.ReplayedHeader) != "" {
					t.Fatalf("retry: %d %q (replayed %q), want 201 placed, not a replay", resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader))
				}
				break
			}
			if orders.Load() != 1 || runs.Load() != 2 {
				t.Fatalf("orders = %d, runs = %d; want 1, 2", orders.Load(), runs.Load())
			}
		})
	}
}

// TestClientClosedRequestIsNotRecorded: a handler that answers its
// request's context ending with 499 Client Closed Request — as nginx logs
// it, and as grpc-gateway maps a canceled call — placed nothing, and its
// client never sees the 499. It is not recorded: the client's retry places
// the order (once), and is never replayed the 499.
func TestClientClosedRequestIsNotRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("needs 4s of real time")
	}
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2], func(t *testing.T) {
			var runs, orders atomic.Int32
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					<-r.Context().Done()
					http.Error(w, "client closed request", 499)
					return
				}
				orders.Add(1)
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "placed")
			})
			srv, client := orderServer(t, h2, next)
			resp, err := client.Post(srv.URL+"/orders", "text/plain", strings.NewReader("1 espresso machine"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusCreated || string(b) != "placed" {
				t.Fatalf("got %d %q (replayed %q), want 201 placed", resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader))
			}
			if orders.Load() != 1 {
				t.Fatalf("orders = %d, want 1", orders.Load())
			}
		})
	}
}

// orderServer serves next behind a Handler that requires a key, over
// HTTP/2 (TLS) or HTTP/1.1 on loopback, and returns it with a client whose
// attempts end after 2s and are retried under one generated key.
func orderServer(t *testing.T, h2 bool, next http.Handler) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(idempotency.Handler(next, memory(), idempotency.Options{RequireKey: true}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	base := srv.Client().Transport.(*http.Transport)
	t.Cleanup(func() {
		base.CloseIdleConnections()
		srv.Close()
	})
	return srv, &http.Client{Transport: &httpretry.Transport{
		Base:              base,
		MaxAttempts:       10,
		AttemptTimeout:    2 * time.Second,
		Timeout:           60 * time.Second,
		Budget:            httpretry.Unlimited,
		NewIdempotencyKey: httpretry.RandomKey,
	}}
}
