package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// closeCountedBody counts the Close calls of a response body.
type closeCountedBody struct {
	io.ReadCloser
	closes *atomic.Int32
}

func (b closeCountedBody) Close() error { b.closes.Add(1); return b.ReadCloser.Close() }

// countingCloses is a Base that sends through inner and counts the closes
// of every response body it returns.
func countingCloses(inner http.RoundTripper, closes *atomic.Int32) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := inner.RoundTrip(r)
		if resp != nil {
			resp.Body = closeCountedBody{resp.Body, closes}
		}
		return resp, err
	})
}

// panicking is a slog handler whose Handle panics on the message msg.
type panicking struct{ msg string }

func (h panicking) Enabled(context.Context, slog.Level) bool { return true }
func (h panicking) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h panicking) WithGroup(string) slog.Handler            { return h }
func (h panicking) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		panic("hook broke")
	}
	return nil
}

// roundTripPanics runs tr.RoundTrip(req) and reports the value it panicked
// with.
func roundTripPanics(t *testing.T, tr http.RoundTripper, req *http.Request) any {
	t.Helper()
	var p any
	func() {
		defer func() { p = recover() }()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	if p == nil {
		t.Fatal("RoundTrip returned; want the hook's panic raised again")
	}
	return p
}

// TestHookPanicClosesEveryResponseOnce: a server answers 200 (or 503,
// retried to the last attempt, whose 503 is the answer) over a real
// loopback connection, and one hook panics on the caller's goroutine
// before RoundTrip returns the answer: OnAttempt, Transient, OnDone, or
// the Logger's handler on the record of a stop. RoundTrip raises the
// hook's panic, and every response it received is closed, exactly once,
// so that no connection and none of its goroutines is left behind
// (goleak).
func TestHookPanicClosesEveryResponseOnce(t *testing.T) {
	t.Parallel()
	boom := func() { panic("hook broke") }
	for _, c := range []struct {
		name   string
		status int
		set    func(tr *Transport)
		sent   int32
	}{
		{"OnAttempt", 200, func(tr *Transport) { tr.OnAttempt = func(*http.Request, Attempt) { boom() } }, 1},
		{"Transient", 200, func(tr *Transport) { tr.Transient = func(*http.Response, error) bool { boom(); return false } }, 1},
		{"OnDone", 200, func(tr *Transport) { tr.OnDone = func(*http.Request, Outcome) { boom() } }, 1},
		{"OnDone after the last 503", 503, func(tr *Transport) { tr.OnDone = func(*http.Request, Outcome) { boom() } }, 3},
		{"Logger on the stop", 503, func(tr *Transport) { tr.Logger = slog.New(panicking{"httpretry: stop"}) }, 3},
		{"OnAttempt of a retried 503", 503, func(tr *Transport) { tr.OnAttempt = func(*http.Request, Attempt) { boom() } }, 1},
		{"Logger on the retry", 503, func(tr *Transport) { tr.Logger = slog.New(panicking{"httpretry: retry"}) }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(c.status)
				io.WriteString(w, "answer")
			}))
			defer srv.Close()
			inner := &http.Transport{}
			defer inner.CloseIdleConnections()
			var closes atomic.Int32
			tr := &Transport{Base: countingCloses(inner, &closes), Budget: Unlimited, Jitter: noJitter, BaseDelay: 1}
			c.set(tr)
			req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			if p := roundTripPanics(t, tr, req); p != "hook broke" {
				t.Fatalf("recovered %v; want the hook's panic", p)
			}
			if n := hits.Load(); n != c.sent {
				t.Errorf("%d requests reached the server; want %d", n, c.sent)
			}
			if n := closes.Load(); n != c.sent {
				t.Errorf("%d response closes for %d responses; want each closed once", n, c.sent)
			}
		})
	}
}

// TestHookPanicGivesBackTheTokenOfAnUnsentRetry: an attempt is answered
// 503, the budget grants a retry, and a hook panics before the retry is
// sent: OnAttempt (told of the wait), the Logger's handler on the record
// of the retry, OnWait, or OnAttemptStart of the retry. The token was
// withdrawn for a retry that is never sent: it is refunded, once, as for
// a retry a wait cut short. A panic in OnAttemptStart of the first
// attempt withdrew nothing and refunds nothing.
func TestHookPanicGivesBackTheTokenOfAnUnsentRetry(t *testing.T) {
	t.Parallel()
	boom := func() { panic("hook broke") }
	for _, c := range []struct {
		name      string
		set       func(tr *Transport)
		withdrawn int32
	}{
		{"OnAttempt", func(tr *Transport) { tr.OnAttempt = func(*http.Request, Attempt) { boom() } }, 1},
		{"Logger on the retry", func(tr *Transport) { tr.Logger = slog.New(panicking{"httpretry: retry"}) }, 1},
		{"OnWait", func(tr *Transport) { tr.OnWait = func(*http.Request, Wait) { boom() } }, 1},
		{"OnAttemptStart of the retry", func(tr *Transport) {
			tr.OnAttemptStart = func(_ *http.Request, n int) {
				if n == 2 {
					boom()
				}
			}
		}, 1},
		{"OnAttemptStart of the first attempt", func(tr *Transport) { tr.OnAttemptStart = func(*http.Request, int) { boom() } }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			inner := &http.Transport{}
			defer inner.CloseIdleConnections()
			b := &countingBudget{}
			tr := &Transport{Base: inner, Budget: b, Jitter: noJitter, BaseDelay: 1}
			c.set(tr)
			req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			roundTripPanics(t, tr, req)
			if n := hits.Load(); n != c.withdrawn {
				t.Errorf("%d requests reached the server; want %d", n, c.withdrawn)
			}
			if w, r := b.withdrawn.Load(), b.refunded.Load(); w != c.withdrawn || r != c.withdrawn {
				t.Errorf("budget: %d withdrawn, %d refunded; want %d and %d: no token kept for a retry never sent", w, r, c.withdrawn, c.withdrawn)
			}
		})
	}
}

// TestHookPanicGivesBackTheQuotaOfAnUnsentAttempt: a destination
// announced 1 request left of its quota (50 minutes to its reset), and
// the next operation's hook panics after the operation took that request
// and before its attempt is sent: Idempotent, NewIdempotencyKey, or
// OnAttemptStart. The server never counted it: the request goes back to
// the quota, and the operation after it is sent, not refused with
// throttle.ErrQuotaExhausted.
func TestHookPanicGivesBackTheQuotaOfAnUnsentAttempt(t *testing.T) {
	t.Parallel()
	boom := func() { panic("hook broke") }
	for _, c := range []struct {
		name string
		set  func(tr *Transport, armed *atomic.Bool)
	}{
		{"Idempotent", func(tr *Transport, armed *atomic.Bool) {
			tr.Idempotent = func(r *http.Request) bool {
				if armed.Load() {
					boom()
				}
				return IsIdempotent(r)
			}
		}},
		{"NewIdempotencyKey", func(tr *Transport, armed *atomic.Bool) {
			tr.NewIdempotencyKey = func() string {
				if armed.Load() {
					boom()
				}
				return "k"
			}
		}},
		{"OnAttemptStart", func(tr *Transport, armed *atomic.Bool) {
			tr.OnAttemptStart = func(*http.Request, int) {
				if armed.Load() {
					boom()
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := fiftyMinuteQuotaServer("1")
			defer srv.Close()
			var armed atomic.Bool
			tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 2,
				Throttle: drawing(&throttle.Throttle{}, func() float64 { return 1 })}
			c.set(tr, &armed)
			post := func() (*http.Response, error) {
				req := newRequest(t, context.Background(), http.MethodPost, srv.URL, nil)
				return tr.RoundTrip(req)
			}
			resp, err := post()
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			armed.Store(true)
			req := newRequest(t, context.Background(), http.MethodPost, srv.URL, nil)
			roundTripPanics(t, tr, req)
			armed.Store(false)
			resp, err = post()
			if errors.Is(err, throttle.ErrQuotaExhausted) {
				t.Fatalf("the operation after the panic: %v; want it sent, the unsent attempt's request given back", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
}

// TestHookPanicClosesEveryRequestBodyOnce: a PUT whose GetBody gives a
// fresh body for each attempt is answered 503 over a real loopback
// connection, and a hook panics: OnAttempt after the first attempt (the
// retry's body already obtained), OnAttemptStart of the retry, or, when
// hedged, OnAttemptStart of the hedge (the first attempt hanging until it
// is canceled, the delay passed on a fake clock). The caller's body and
// every body GetBody gave are closed exactly once.
func TestHookPanicClosesEveryRequestBodyOnce(t *testing.T) {
	t.Parallel()
	boom := func() { panic("hook broke") }
	for _, c := range []struct {
		name   string
		hedged bool
		set    func(tr *Transport)
	}{
		{"OnAttempt", false, func(tr *Transport) { tr.OnAttempt = func(*http.Request, Attempt) { boom() } }},
		{"OnAttemptStart of the retry", false, func(tr *Transport) {
			tr.OnAttemptStart = func(_ *http.Request, n int) {
				if n == 2 {
					boom()
				}
			}
		}},
		{"OnAttemptStart of the hedge", true, func(tr *Transport) {
			tr.OnAttemptStart = func(_ *http.Request, n int) {
				if n == 2 {
					boom()
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			first := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if c.hedged {
					first <- struct{}{}
					<-r.Context().Done()
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			inner := &http.Transport{}
			defer inner.CloseIdleConnections()
			fc := clockwork.NewFakeClock()
			tr := &Transport{Base: inner, Budget: Unlimited, Jitter: noJitter, BaseDelay: 1, Clock: fc}
			if c.hedged {
				tr.Hedging = &Hedging{Delay: 5 * time.Millisecond}
				go func() {
					<-first
					advance(t, fc, 1, 5*time.Millisecond)
				}()
			}
			c.set(tr)
			var mu sync.Mutex
			bodies := []*countingBody{newCountingBody("payload")}
			req := newRequest(t, context.Background(), http.MethodPut, srv.URL, bodies[0])
			req.ContentLength = int64(len("payload"))
			req.GetBody = func() (io.ReadCloser, error) {
				mu.Lock()
				defer mu.Unlock()
				b := newCountingBody("payload")
				bodies = append(bodies, b)
				return b, nil
			}
			roundTripPanics(t, tr, req)
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 2 {
				t.Errorf("%d bodies; want the caller's and one from GetBody", len(bodies))
			}
			for i, b := range bodies {
				if n := b.closes(); n != 1 {
					t.Errorf("body %d closed %d times; want once", i, n)
				}
			}
		})
	}
}

// TestHookPanicInOnWaitGivesBackTheQuotaWaitedFor: a destination's
// quota of 1 request is spent until 10s later, the next operation waits
// for the reset (WaitQuota, on a fake clock), takes the renewed window's
// request, and OnWait, told of that wait, panics before the attempt is
// sent. The request goes back to the quota: the operation after it is
// admitted at once and sent, not held for the window after.
func TestHookPanicInOnWaitGivesBackTheQuotaWaitedFor(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ratelimit-Limit", "1")
		w.Header().Set("X-Ratelimit-Remaining", "0")
		w.Header().Set("X-Ratelimit-Reset", "10")
		hits.Add(1)
	}))
	defer srv.Close()
	fc := clockwork.NewFakeClock()
	var armed atomic.Bool
	tr := &Transport{Base: srv.Client().Transport, Clock: fc,
		Throttle: drawing(&throttle.Throttle{WaitQuota: true}, func() float64 { return 1 }),
		OnWait: func(*http.Request, Wait) {
			if armed.Load() {
				panic("hook broke")
			}
		}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	armed.Store(true)
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	}()
	advance(t, fc, 1, 10*time.Second)
	if p := <-got; p != "hook broke" {
		t.Fatalf("recovered %v; want the hook's panic", p)
	}
	armed.Store(false)
	r := await(t, start(tr, newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)))
	if r.err != nil {
		t.Fatalf("the operation after the panic: %v; want it sent", r.err)
	}
	r.resp.Body.Close()
	if n := hits.Load(); n != 2 {
		t.Errorf("%d requests reached the server; want 2 (the panicking operation sent none)", n)
	}
}
