// Command demo walks through httpretry's retry decisions against a local,
// deliberately flaky HTTP server, printing every attempt as it happens.
//
// It needs no setup and no network beyond 127.0.0.1:
//
//	go run ./examples/demo
//
// Five scenarios show the main stop reasons:
//
//	(a) a GET that fails twice with 503 and then succeeds: retried, "final";
//	(b) a GET that always gets 503: "attempts_exhausted", the 503 returned;
//	(c) a 503 with Retry-After: 120 under a 2s Timeout:
//	    "retry_after_exceeds_deadline", with no second attempt;
//	(d) a POST without an idempotency key answered 503: "not_idempotent",
//	    a single attempt, because repeating it could apply it twice;
//	(e) the same POST with NewIdempotencyKey set to [httpretry.RandomKey]:
//	    retried, and the server sees the same key on every attempt.
//
// Every attempt is reported twice: by the Transport's OnAttempt hook
// ("client:" lines) and, for each retry and each stop other than "final",
// by its slog Logger ("slog:" lines). Each scenario ends with the
// operation's [httpretry.Outcome], read through [httpretry.WithOutcome].
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// scenario is one request against the demo server and the Transport
// settings it runs with.
type scenario struct {
	name      string // "(a)" … "(e)"
	title     string
	method    string
	path      string
	configure func(*httpretry.Transport) // adjusts the scenario's Transport; may be nil
}

var scenarios = []scenario{
	{
		name: "(a)", title: "GET that fails twice with 503, then succeeds",
		method: http.MethodGet, path: "/flaky",
	},
	{
		name: "(b)", title: "GET against a server that always answers 503",
		method: http.MethodGet, path: "/down",
	},
	{
		name: "(c)", title: "503 with Retry-After: 120 inside a 2s Timeout",
		method: http.MethodGet, path: "/slow-down",
		configure: func(t *httpretry.Transport) { t.Timeout = 2 * time.Second },
	},
	{
		name: "(d)", title: "POST without an idempotency key, answered 503",
		method: http.MethodPost, path: "/orders-once",
	},
	{
		name: "(e)", title: "POST with NewIdempotencyKey: httpretry.RandomKey, fails twice",
		method: http.MethodPost, path: "/orders",
		configure: func(t *httpretry.Transport) { t.NewIdempotencyKey = httpretry.RandomKey },
	},
}

// run starts the demo server, runs every scenario against it and writes a
// readable trace to w. It closes the server and the client's idle
// connections before it returns.
func run(w io.Writer) error {
	out := &lockedWriter{w: w}
	srv := httptest.NewServer(newFlakyServer(out))
	defer srv.Close()

	// One connection pool for all scenarios, as an application would have.
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()

	logger := slog.New(slog.NewTextHandler(&prefixWriter{w: out, prefix: "  slog:   "}, &slog.HandlerOptions{
		// Drop the timestamp: it makes the trace harder to read.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))

	fmt.Fprintf(out, "demo server at %s\n", srv.URL)
	for _, sc := range scenarios {
		t := &httpretry.Transport{
			Base:      base,
			BaseDelay: 50 * time.Millisecond,
			Logger:    logger,
			OnAttempt: func(req *http.Request, a httpretry.Attempt) {
				fmt.Fprintf(out, "  client: %s\n", describeAttempt(a))
			},
		}
		if sc.configure != nil {
			sc.configure(t)
		}
		client := &http.Client{Transport: t}
		fmt.Fprintf(out, "\n== %s %s\n", sc.name, sc.title)
		if err := runScenario(out, client, srv.URL, sc); err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
	}
	return nil
}

// runScenario sends the scenario's request and prints the response (or
// error) and the Outcome.
func runScenario(w io.Writer, client *http.Client, baseURL string, sc scenario) error {
	var o httpretry.Outcome
	ctx := httpretry.WithOutcome(context.Background(), &o)
	var body io.Reader
	if sc.method == http.MethodPost {
		body = strings.NewReader(`{"item":"book","qty":1}`)
	}
	req, err := http.NewRequestWithContext(ctx, sc.method, baseURL+sc.path, body)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		// A request that ends without a response is a result here, not a
		// failure of the demo.
		fmt.Fprintf(w, "  result: error: %v\n", err)
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  result: %s, body %q\n", resp.Status, strings.TrimSpace(string(b)))
	}
	fmt.Fprintf(w, "  outcome: attempts=%d reason=%s status=%d waited=%s elapsed=%s\n",
		o.Attempts, o.Reason, o.Status, round(o.Waited), round(o.Elapsed))
	return nil
}

// describeAttempt renders one attempt as reported to OnAttempt.
func describeAttempt(a httpretry.Attempt) string {
	var b strings.Builder
	fmt.Fprintf(&b, "attempt %d: ", a.Number)
	if a.Err != nil {
		fmt.Fprintf(&b, "error %v", a.Err)
	} else {
		fmt.Fprintf(&b, "status %d", a.Status)
	}
	fmt.Fprintf(&b, " in %s", round(a.Duration))
	if a.Wait > 0 {
		fmt.Fprintf(&b, ", waiting %s before the next attempt", round(a.Wait))
	} else {
		b.WriteString(", no further attempt")
	}
	return b.String()
}

// round keeps durations short enough to read.
func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// newFlakyServer returns the demo server's handler. Each path fails in its
// own way, counting its requests separately; every request is printed to
// w as a "server:" line before it is answered.
func newFlakyServer(w io.Writer) http.Handler {
	var flaky, orders atomic.Int64
	mux := http.NewServeMux()
	logRequest := func(r *http.Request, n int64, status int) {
		key := r.Header.Get(httpretry.IdempotencyKeyHeader)
		if key == "" {
			key = "(none)"
		}
		fmt.Fprintf(w, "  server: %s %s request %d, %s=%s -> %d\n",
			r.Method, r.URL.Path, n, httpretry.IdempotencyKeyHeader, key, status)
	}
	// (a): two 503s, then 200.
	mux.HandleFunc("GET /flaky", func(rw http.ResponseWriter, r *http.Request) {
		n := flaky.Add(1)
		if n <= 2 {
			logRequest(r, n, http.StatusServiceUnavailable)
			http.Error(rw, "warming up", http.StatusServiceUnavailable)
			return
		}
		logRequest(r, n, http.StatusOK)
		fmt.Fprintln(rw, "ok")
	})
	// (b): always 503.
	var down atomic.Int64
	mux.HandleFunc("GET /down", func(rw http.ResponseWriter, r *http.Request) {
		logRequest(r, down.Add(1), http.StatusServiceUnavailable)
		http.Error(rw, "down for maintenance", http.StatusServiceUnavailable)
	})
	// (c): 503 asking for two minutes.
	var slowDown atomic.Int64
	mux.HandleFunc("GET /slow-down", func(rw http.ResponseWriter, r *http.Request) {
		logRequest(r, slowDown.Add(1), http.StatusServiceUnavailable)
		rw.Header().Set("Retry-After", "120")
		http.Error(rw, "come back in two minutes", http.StatusServiceUnavailable)
	})
	// (d): 503 to a POST that carries no key.
	var once atomic.Int64
	mux.HandleFunc("POST /orders-once", func(rw http.ResponseWriter, r *http.Request) {
		logRequest(r, once.Add(1), http.StatusServiceUnavailable)
		http.Error(rw, "overloaded", http.StatusServiceUnavailable)
	})
	// (e): two 503s, then 201.
	mux.HandleFunc("POST /orders", func(rw http.ResponseWriter, r *http.Request) {
		n := orders.Add(1)
		if n <= 2 {
			logRequest(r, n, http.StatusServiceUnavailable)
			http.Error(rw, "overloaded", http.StatusServiceUnavailable)
			return
		}
		logRequest(r, n, http.StatusCreated)
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprintln(rw, "order created")
	})
	return mux
}

// lockedWriter serialises writes from the server's handlers, the client's
// hooks and the logger, which run on different goroutines.
type lockedWriter struct {
	mu sync.Mutex // protects w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter prepends prefix to each write; slog handlers write one
// record per call.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
