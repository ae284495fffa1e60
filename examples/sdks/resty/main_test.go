package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-resty/resty/v2"
	"go.uber.org/goleak"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := `GET /orders/o1: 200, order o1 with 2 items
POST /orders: 200, order o2 with 3 items
server requests: 4
`
	if got := buf.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// resty's default RetryCount is 0: a server that always fails gets exactly
// httpretry's attempts, and the caller the final response.
func TestRestyDoesNotRetryOnTop(t *testing.T) {
	srv := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, _ int) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	defer srv.Close()
	c, tr := newClient(srv.URL, nil)
	defer tr.CloseIdleConnections()

	resp, err := c.R().Get("/orders/o1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if resp.StatusCode() != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", resp.StatusCode())
	}
	if got := srv.Hits(); got != httpretry.DefaultMaxAttempts {
		t.Errorf("server hits = %d, want %d", got, httpretry.DefaultMaxAttempts)
	}
}

// A POST is repeated under one generated key, with the same body.
func TestPostRepeatedUnderOneKey(t *testing.T) {
	srv := fake.NewServer(flaky)
	defer srv.Close()
	c, tr := newClient(srv.URL, nil)
	defer tr.CloseIdleConnections()

	var order Order
	resp, err := c.R().SetBody(Order{Items: 7}).SetResult(&order).Post("/orders")
	if err != nil || resp.StatusCode() != http.StatusOK {
		t.Fatalf("Post: %v, %v", resp, err)
	}
	if order != (Order{ID: "o2", Items: 7}) {
		t.Errorf("order = %+v, want {o2 7}", order)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server hits = %d, want 2", len(reqs))
	}
	if keys := fake.Distinct(reqs, httpretry.IdempotencyKeyHeader); len(keys) != 1 || keys[0] == "" {
		t.Errorf("idempotency keys = %q, want one, the same on both attempts", keys)
	}
	if !fake.SameBodies(reqs) || string(reqs[0].Body) != `{"id":"","items":7}` {
		t.Errorf("bodies = %q, %q; want {\"id\":\"\",\"items\":7} twice", reqs[0].Body, reqs[1].Body)
	}
}

// SetProxy after the wrapping is lost: resty logs an error and the request
// goes straight to the server. Before the wrapping it takes effect.
func TestSetProxyBeforeWrapping(t *testing.T) {
	target := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, _ int) { fmt.Fprint(w, "direct") })
	defer target.Close()
	proxy := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, _ int) { fmt.Fprint(w, "via proxy") })
	defer proxy.Close()

	t.Run("after wrapping: ignored", func(t *testing.T) {
		log := &logger{}
		c, tr := newClient(target.URL, func(c *resty.Client) { c.SetLogger(log) })
		defer tr.CloseIdleConnections()
		c.SetProxy(proxy.URL)
		resp, err := c.R().Get("/x")
		if err != nil || resp.String() != "direct" {
			t.Fatalf("Get = %q, %v; want %q", resp.String(), err, "direct")
		}
		if got := log.String(); !strings.Contains(got, "not an *http.Transport") {
			t.Errorf("resty logged %q, want the error that the transport is not an *http.Transport", got)
		}
	})
	t.Run("before wrapping: applied", func(t *testing.T) {
		c, tr := newClient(target.URL, func(c *resty.Client) { c.SetProxy(proxy.URL) })
		defer tr.CloseIdleConnections()
		resp, err := c.R().Get("/x")
		if err != nil || resp.String() != "via proxy" {
			t.Fatalf("Get = %q, %v; want %q", resp.String(), err, "via proxy")
		}
	})
	if got := proxy.Hits(); got != 1 {
		t.Errorf("proxy hits = %d, want 1", got)
	}
}

// logger collects what resty logs.
type logger struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logger) Errorf(format string, v ...any) { l.printf("ERROR "+format, v...) }
func (l *logger) Warnf(format string, v ...any)  { l.printf("WARN "+format, v...) }
func (l *logger) Debugf(format string, v ...any) { l.printf("DEBUG "+format, v...) }

func (l *logger) printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, format+"\n", v...)
}

func (l *logger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
