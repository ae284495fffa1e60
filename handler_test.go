package httpretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
)

// serve runs one request through DeadlineHandler and reports what next saw.
type seen struct {
	called   bool
	deadline time.Duration // time left at entry; -1 if none
	owned    bool
}

func serve(t *testing.T, maxTimeout time.Duration, header http.Header, ctx context.Context) (*httptest.ResponseRecorder, seen) {
	t.Helper()
	var s seen
	h := DeadlineHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called = true
		s.deadline = -1
		if d, ok := r.Context().Deadline(); ok {
			s.deadline = time.Until(d)
		}
		s.owned = retriesOwned(r.Context())
		io.WriteString(w, "ok")
	}), maxTimeout)
	req := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, s
}

func TestHandlerDeadline(t *testing.T) {
	t.Parallel()
	const maxTimeout = 2 * time.Second
	tests := []struct {
		name    string
		timeout string // TimeoutHeader; "" for none
		want    time.Duration
	}{
		{"propagated shorter than max", "500", 500 * ms},
		{"max shorter than propagated", "10000", maxTimeout},
		{"missing", "", maxTimeout},
		{"malformed", "soon", maxTimeout},
		{"negative", "-5", maxTimeout},
		{"fractional", "1.5", maxTimeout},
		{"huge", "999999999999999999999999", maxTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.timeout != "" {
				h.Set(TimeoutHeader, tt.timeout)
			}
			rec, s := serve(t, maxTimeout, h, context.Background())
			if !s.called || rec.Code != 200 {
				t.Fatalf("next called %v, status %d", s.called, rec.Code)
			}
			// The deadline is set on entry; allow for the time the test
			// itself takes to get there.
			if s.deadline > tt.want || s.deadline < tt.want-time.Second/2 {
				t.Errorf("time left = %v; want about %v", s.deadline, tt.want)
			}
			if s.owned {
				t.Error("retries marked as owned without AttemptHeader")
			}
		})
	}
}

func TestHandlerKeepsEarlierDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*ms)
	defer cancel()
	_, s := serve(t, 5*time.Second, http.Header{TimeoutHeader: {"4000"}}, ctx)
	if s.deadline > 300*ms {
		t.Errorf("time left = %v; the context's earlier deadline must stay", s.deadline)
	}
}

func TestHandlerNoMax(t *testing.T) {
	t.Parallel()
	_, s := serve(t, 0, http.Header{}, context.Background())
	if s.deadline != -1 {
		t.Errorf("time left = %v; want no deadline without maxTimeout or header", s.deadline)
	}
	_, s = serve(t, 0, http.Header{TimeoutHeader: {"250"}}, context.Background())
	if s.deadline > 250*ms || s.deadline <= 0 {
		t.Errorf("time left = %v; want the propagated 250ms", s.deadline)
	}
}

func TestHandlerSpentDeadline(t *testing.T) {
	t.Parallel()
	rec, s := serve(t, time.Second, http.Header{TimeoutHeader: {"0"}, AttemptHeader: {"2"}}, context.Background())
	if s.called {
		t.Error("next was called for a request whose time was spent")
	}
	if rec.Code != 503 || rec.Header().Get("X-Should-Retry") != "false" || rec.Header().Get("Retry-After") != "" {
		t.Errorf("got %d %v; want 503 with X-Should-Retry: false and no Retry-After", rec.Code, rec.Header())
	}
	// A retrying client reads that answer as final.
	resp := &http.Response{StatusCode: rec.Code, Header: rec.Header()}
	if IsTransient(resp, nil) {
		t.Error("DeadlineHandler's own 503 must not be retried")
	}
}

func TestHandlerMarksRetriesOwned(t *testing.T) {
	t.Parallel()
	_, s := serve(t, time.Second, http.Header{AttemptHeader: {"1"}}, context.Background())
	if !s.owned {
		t.Fatal("a request from a retrying client must mark retries as owned upstream")
	}
	// A Transport used while serving that request makes one attempt.
	dep := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
	tr := &Transport{Base: dep, Jitter: noJitter}
	h := DeadlineHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := tr.RoundTrip(newRequest(t, r.Context(), "GET", "http://dep.test/", nil))
		if err != nil {
			t.Error(err)
			return
		}
		w.WriteHeader(resp.StatusCode)
		resp.Body.Close()
	}), time.Second)
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(AttemptHeader, "3")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if dep.Hits() != 1 {
		t.Errorf("dependency saw %d requests; want a single attempt", dep.Hits())
	}
	// Without AttemptHeader the same Transport retries as usual.
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if dep.Hits() != 4 {
		t.Errorf("dependency saw %d requests; want 1 + 3", dep.Hits())
	}
}

func TestParseTimeoutHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true}, {"1", ms, true}, {"1500", 1500 * ms, true},
		{"86399999", 24*time.Hour - ms, true}, {"86400000", 24 * time.Hour, true}, {"86400001", 24 * time.Hour, true},
		{"99999999999999999999999999", 24 * time.Hour, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"1e3", 0, false}, {" 5", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseTimeoutHeader(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseTimeoutHeader(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestDetachedWorkKeepsItsOwnRetries: work a handler detaches from its
// request (context.WithoutCancel), on its own or with a timeout of its own
// once the response is sent, is retried by its own Transport: the retrying
// client upstream owns the request's retries, not this work's.
func TestDetachedWorkKeepsItsOwnRetries(t *testing.T) {
	tests := []struct {
		name string
		// detach derives the work's context from the request's;
		// afterReply starts the work once the request has ended.
		detach     func(context.Context) (context.Context, context.CancelFunc)
		afterReply bool
		want       int // backend requests
	}{
		{"WithoutCancel", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithoutCancel(ctx), func() {}
		}, false, 3},
		{"WithoutCancel and a timeout, after the request ended", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		}, true, 3},
		{"the request's own context", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return ctx, func() {}
		}, false, 1},
	}
	for _, p := range protocols {
		for _, tt := range tests {
			t.Run(p.name+"/"+tt.name, func(t *testing.T) {
				var hits atomic.Int32
				backend := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if hits.Add(1) < 3 {
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					io.WriteString(w, "done")
				}))
				tr := &Transport{Base: serverBase(t, backend), Jitter: noJitter, BaseDelay: time.Millisecond}
				var o Outcome
				var work sync.WaitGroup
				front := newLoopbackServer(t, p.h2, DeadlineHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ctx, cancel := tt.detach(r.Context())
					ended := r.Context().Done()
					work.Go(func() {
						defer cancel()
						if tt.afterReply {
							<-ended
						}
						resp, err := tr.RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", backend.URL, nil))
						if err == nil {
							resp.Body.Close()
						}
					})
					if !tt.afterReply {
						work.Wait()
					}
					w.WriteHeader(http.StatusAccepted)
				}), 0))
				req := newRequest(t, context.Background(), "GET", front.URL, nil)
				req.Header.Set(AttemptHeader, "1")
				resp, err := serverBase(t, front).RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				work.Wait()
				if got := int(hits.Load()); got != tt.want || o.Attempts != tt.want {
					t.Errorf("backend saw %d requests, outcome %+v; want %d", got, o, tt.want)
				}
			})
		}
	}
}

// TestDetachedWorkWithItsOwnTimeoutKeepsItsRetriesWhenMarkedOwn: work a
// handler detaches from its request with context.WithoutCancel and bounds
// with a timeout of its own, while the request still runs, is retried by
// its own Transport (3 attempts) once marked WithOwnRetries: nobody
// upstream retries that work. Without the mark such a context cannot be
// told from the request's own (it ends again, and the request has not
// ended), so it makes one attempt, as docs/rules.md says.
func TestDetachedWorkWithItsOwnTimeoutKeepsItsRetriesWhenMarkedOwn(t *testing.T) {
	for _, p := range protocols {
		for _, tt := range []struct {
			name   string
			detach func(context.Context) context.Context
			want   int
		}{
			{"WithOwnRetries", func(ctx context.Context) context.Context { return WithOwnRetries(context.WithoutCancel(ctx)) }, 3},
			{"WithoutCancel and a timeout, unmarked", context.WithoutCancel, 1},
		} {
			t.Run(p.name+"/"+tt.name, func(t *testing.T) {
				var hits atomic.Int32
				backend := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if hits.Add(1) < 3 {
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					io.WriteString(w, "done")
				}))
				tr := &Transport{Base: serverBase(t, backend), Jitter: noJitter, BaseDelay: time.Millisecond}
				var o Outcome
				front := newLoopbackServer(t, p.h2, DeadlineHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ctx, cancel := context.WithTimeout(tt.detach(r.Context()), 10*time.Second)
					defer cancel()
					resp, err := tr.RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", backend.URL, nil))
					if err == nil {
						resp.Body.Close()
					}
					w.WriteHeader(http.StatusAccepted)
				}), 0))
				req := newRequest(t, context.Background(), "GET", front.URL, nil)
				req.Header.Set(AttemptHeader, "1")
				resp, err := serverBase(t, front).RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := int(hits.Load()); got != tt.want || o.Attempts != tt.want {
					t.Errorf("backend saw %d requests, outcome %+v; want %d", got, o, tt.want)
				}
			})
		}
	}
}

// TestWithOwnRetries: a context marked as owned by an outer layer makes
// one attempt; WithOwnRetries of it makes MaxAttempts, keeps its values,
// deadline and cancellation, and leaves an unmarked context as it is. A
// Transport sending with it takes ownership again for the layers below.
func TestWithOwnRetries(t *testing.T) {
	t.Parallel()
	plain := context.WithValue(context.Background(), ctxTestKey{}, "v")
	if got := WithOwnRetries(plain); got != plain {
		t.Error("WithOwnRetries of an unmarked context returned another context; want it unchanged")
	}
	ctx, cancel := context.WithTimeout(plain, time.Hour)
	defer cancel()
	owned := withRetriesOwned(ctx)
	if !retriesOwned(owned) {
		t.Fatal("the marked context is not owned")
	}
	own := WithOwnRetries(owned)
	if retriesOwned(own) {
		t.Error("WithOwnRetries left the context owned")
	}
	if own.Value(ctxTestKey{}) != "v" {
		t.Error("WithOwnRetries lost the context's values")
	}
	if d, ok := own.Deadline(); !ok || !d.Equal(mustDeadline(t, ctx)) {
		t.Errorf("deadline %v, %v; want the parent's", d, ok)
	}
	if !retriesOwned(withRetriesOwned(own)) {
		t.Error("a Transport below WithOwnRetries cannot take ownership again")
	}
	cancel()
	if own.Err() == nil {
		t.Error("WithOwnRetries ignored its parent's cancellation")
	}
}

type ctxTestKey struct{}

func mustDeadline(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	d, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	return d
}
