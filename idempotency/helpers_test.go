package idempotency_test

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

// events collects what a Handler reports.
type events struct {
	mu   sync.Mutex
	list []idempotency.Event
}

func (e *events) add(ev idempotency.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) count(kind idempotency.Kind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.list {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func (e *events) kinds() []idempotency.Kind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []idempotency.Kind
	for _, ev := range e.list {
		out = append(out, ev.Kind)
	}
	return out
}

// server is a Handler on a loopback test server, with a client of its
// own.
type server struct {
	url    string
	client *http.Client
	events *events
}

// newServer serves next behind Handler(next, store, opts) on 127.0.0.1.
// It records events (opts.OnEvent is replaced) and silences the server's
// log of recovered panics.
func newServer(t *testing.T, next http.Handler, store idempotency.Store, opts idempotency.Options) *server {
	t.Helper()
	ev := &events{}
	opts.OnEvent = ev.add
	srv := httptest.NewUnstartedServer(idempotency.Handler(next, store, opts))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return &server{url: srv.URL, client: &http.Client{Transport: tr}, events: ev}
}

// reply is a response read to its end.
type reply struct {
	status  int
	proto   string
	header  http.Header
	trailer http.Header
	body    string
	err     error
}

// send makes one request with the key (none if key is "") and reads the
// whole response.
func (s *server) send(t *testing.T, method, path, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(idempotency.KeyHeader, key)
	}
	return s.do(req)
}

func (s *server) do(req *http.Request) reply {
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, trailer: resp.Trailer, body: string(b), err: err}
}

func (s *server) post(t *testing.T, key, body string) reply {
	t.Helper()
	return s.send(t, http.MethodPost, "/orders", key, body)
}

// counter is a handler that counts its runs and answers status with a
// body naming the run.
type counter struct {
	mu     sync.Mutex
	runs   int
	status int
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.runs++
	n := c.runs
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	status := c.status
	if status == 0 {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	io.WriteString(w, "run "+strconv.Itoa(n))
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

// problemOf decodes a problem details body, checking its media type.
func problemOf(t *testing.T, r reply) map[string]any {
	t.Helper()
	if got := r.header.Get("Content-Type"); got != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", got)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	for _, f := range []string{"type", "title", "detail"} {
		if s, _ := p[f].(string); s == "" {
			t.Fatalf("problem %v lacks %q", p, f)
		}
	}
	if got := p["status"]; got != float64(r.status) {
		t.Fatalf("problem status = %v, want %d", got, r.status)
	}
	return p
}

func expectStatus(t *testing.T, what string, r reply, want int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	if r.status != want {
		t.Fatalf("%s: status %d, want %d (body %q)", what, r.status, want, r.body)
	}
}

// gate holds handlers until opened. It opens at the latest when the test
// ends, before its servers close, so that a failing test cannot leave a
// handler blocked and the server's Close waiting for it forever.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

// openAtEnd opens g when the test ends. Call it after newServer or
// startServer, so that it runs before their cleanups.
func (g *gate) openAtEnd(t *testing.T) { t.Cleanup(g.open) }

func (g *gate) open()                 { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait() <-chan struct{} { return g.ch }
