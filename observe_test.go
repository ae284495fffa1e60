package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// captureHandler is a slog.Handler that keeps every record.
type captureHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *captureHandler) WithGroup(string) slog.Handler            { return h }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// attrs returns a record's attributes as strings by key.
func attrs(r slog.Record) map[string]string {
	m := make(map[string]string)
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

func TestLoggerRecordsDecisions(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 503},
		httptestutil.Step{Err: httptestutil.ErrReset},
		httptestutil.Step{Status: 503},
	)
	h := &captureHandler{}
	tr := &Transport{Base: base, Clock: fc, Timeout: 10 * time.Second, Jitter: waits(20*ms, 30*ms), Logger: slog.New(h),
		LogRoute: func(*http.Request) string { return "/books/{id}" }}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/books/b1?token=s3cret", nil))
	advance(t, fc, 2, 20*ms)
	advance(t, fc, 2, 30*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if len(h.records) != 3 {
		t.Fatalf("got %d records; want 2 retries and 1 stop", len(h.records))
	}
	want := []map[string]string{
		{"method": "GET", "host": "api.test", "route": "/books/{id}", "attempt": "1", "status": "503", "wait": "20ms", "time_left": "10s"},
		{"method": "GET", "host": "api.test", "route": "/books/{id}", "attempt": "2", "error": "connection_reset", "wait": "30ms", "time_left": "9.98s"},
		{"method": "GET", "host": "api.test", "route": "/books/{id}", "attempt": "3", "status": "503", "time_left": "9.95s", "reason": "attempts_exhausted"},
	}
	for i, w := range want {
		got := attrs(h.records[i])
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("record %d = %v; want %v", i, got, w)
		}
	}
	if h.records[0].Level != slog.LevelInfo || h.records[2].Level != slog.LevelWarn {
		t.Errorf("levels %v, %v; want INFO for a retry, WARN for a stop", h.records[0].Level, h.records[2].Level)
	}
}

func TestFinalStopIsNotLogged(t *testing.T) {
	t.Parallel()
	h := &captureHandler{}
	tr := &Transport{Base: httptestutil.NewTransport(nil, httptestutil.Step{Status: 200}), Logger: slog.New(h)}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if len(h.records) != 0 {
		t.Errorf("got %d records for a first-attempt success; want 0", len(h.records))
	}
}

// TestNoSecretsAnywhere sends retried and failing requests whose URL
// carries userinfo and a query token and whose headers carry credentials,
// and looks for those values in every log record, error, Outcome and
// Attempt.
func TestNoSecretsAnywhere(t *testing.T) {
	t.Parallel()
	secrets := []string{"hunter2", "s3cr3t-token", "Bearer abc.def", "session=xyz", "Basic cHJveHk=", "alice"}
	for _, tc := range []struct {
		name  string
		steps []httptestutil.Step
	}{
		{"retried then 503", []httptestutil.Step{{Status: 503}}},
		{"errors", []httptestutil.Step{{Err: httptestutil.ErrReset}}},
		{"refused", []httptestutil.Step{{Err: httptestutil.ErrRefused}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			h := &captureHandler{}
			var log attemptLog
			var sink strings.Builder
			tr := &Transport{Base: httptestutil.NewTransport(fc, tc.steps...), Clock: fc, Jitter: noJitter,
				Logger: slog.New(slog.NewTextHandler(&sink, nil)), OnAttempt: log.onAttempt, OnDone: log.onDone,
				LogRoute: func(*http.Request) string { return "/v1/books" }}
			tr.Logger = slog.New(multiHandler{h, tr.Logger.Handler()})
			req := newRequest(t, context.Background(), "GET", "https://alice:hunter2@api.test/v1/books?api_key=s3cr3t-token", nil)
			req.Header.Set("Authorization", "Bearer abc.def")
			req.Header.Set("Cookie", "session=xyz")
			req.Header.Set("Proxy-Authorization", "Basic cHJveHk=")
			var o Outcome
			req = req.WithContext(WithOutcome(req.Context(), &o))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				readBody(t, resp)
			}
			var seen []string
			seen = append(seen, sink.String(), fmt.Sprintf("%+v", o))
			if err != nil {
				seen = append(seen, err.Error())
			}
			for _, a := range log.attempts {
				seen = append(seen, fmt.Sprintf("%+v", a))
			}
			for _, d := range log.done {
				seen = append(seen, fmt.Sprintf("%+v", d))
			}
			for _, r := range h.records {
				seen = append(seen, r.Message, fmt.Sprint(attrs(r)))
			}
			all := strings.Join(seen, "\n")
			for _, s := range secrets {
				if strings.Contains(all, s) {
					t.Errorf("secret %q leaked in:\n%s", s, all)
				}
			}
			if !strings.Contains(sink.String(), "route=/v1/books") {
				t.Errorf("log lacks the route LogRoute names: %s", sink.String())
			}
		})
	}
}

// multiHandler sends each record to several handlers.
type multiHandler []slog.Handler

func (m multiHandler) Enabled(context.Context, slog.Level) bool { return true }
func (m multiHandler) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m multiHandler) WithGroup(string) slog.Handler            { return m }
func (m multiHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range m {
		if err := h.Handle(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func TestHooksAndOutcomeAgree(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Err: httptestutil.ErrReset}, httptestutil.Step{Status: 200})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(70 * ms), OnAttempt: log.onAttempt, OnDone: log.onDone}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 70*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if len(log.done) != 1 || log.done[0] != o {
		t.Fatalf("OnDone %+v; want once with %+v", log.done, o)
	}
	if len(log.attempts) != o.Attempts || o.Attempts != 2 {
		t.Fatalf("OnAttempt called %d times for %d attempts", len(log.attempts), o.Attempts)
	}
	var waited time.Duration
	for _, a := range log.attempts {
		waited += a.Wait
	}
	if waited != o.Waited || !errors.Is(log.attempts[0].Err, httptestutil.ErrReset) || log.attempts[1].Status != 200 {
		t.Errorf("attempts %+v do not agree with outcome %+v", log.attempts, o)
	}
}

func TestWithOutcomeNil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if WithOutcome(ctx, nil) != ctx {
		t.Error("WithOutcome(ctx, nil) must return ctx")
	}
	tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) { return response(r, 204, ""), nil })}
	if _, err := tr.RoundTrip(newRequest(t, WithOutcome(ctx, nil), "GET", "http://api.test/", nil)); err != nil {
		t.Fatal(err)
	}
}

func TestLogNamesTheURLHost(t *testing.T) {
	t.Parallel()
	h := &captureHandler{}
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
	req := newRequest(t, context.Background(), "GET", "http://10.0.0.7:8080/v1/x", nil)
	req.Host = "virtual.example" // the Host header may differ from where the request goes
	resp, err := (&Transport{Base: base, Jitter: noJitter, Logger: slog.New(h)}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if len(h.records) == 0 || attrs(h.records[0])["host"] != "10.0.0.7:8080" {
		t.Errorf("records %v; want host 10.0.0.7:8080", h.records)
	}
}

// The secrets of TestNoSecretsOverLoopback, each placed where a careless
// log or error would pick it up.
var hostileSecrets = []string{
	"hunter2",                 // URL userinfo password
	"alice",                   // URL userinfo user
	"s3cr3t-token",            // query string
	"Bearer abc.def",          // Authorization
	"session=xyz",             // Cookie
	"Basic cHJveHk=",          // Proxy-Authorization
	"set-cookie-value-qq7",    // a response header
	"response-body-secret-k9", // a response body
}

// TestNoSecretsOverLoopback is TestNoSecretsAnywhere on real sockets: real
// net/http errors (refused, reset, timed out) and real responses, over
// HTTP/1.1 and HTTP/2, through every hook, the Logger, WithOutcome and the
// returned error.
func TestNoSecretsOverLoopback(t *testing.T) {
	realTime(t)
	t.Parallel()
	secretResp := httptestutil.Step{Status: 503, Body: "response-body-secret-k9",
		Header: http.Header{"Set-Cookie": {"token=set-cookie-value-qq7"}}}
	tests := []struct {
		name   string
		h2     bool
		steps  []httptestutil.Step // nil: a closed port
		method string
	}{
		{"retried then 503", false, []httptestutil.Step{secretResp}, "GET"},
		{"retried then 200", false, []httptestutil.Step{secretResp, {Body: "response-body-secret-k9"}}, "GET"},
		{"connection closed", false, []httptestutil.Step{{Action: httptestutil.CloseConn}}, "GET"},
		{"POST reset, outcome unknown", false, []httptestutil.Step{{Action: httptestutil.CloseConn}}, "POST"},
		{"attempts time out", false, []httptestutil.Step{{Action: httptestutil.Hang}}, "GET"},
		{"refused", false, nil, "GET"},
		{"h2 retried then 503", true, []httptestutil.Step{secretResp}, "GET"},
		{"h2 stream reset", true, []httptestutil.Step{{Action: httptestutil.CloseConn}}, "GET"},
		{"h2 refused", true, nil, "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				srv  *httptestutil.Server
				base = &http.Transport{ForceAttemptHTTP2: tt.h2}
				host string
			)
			switch {
			case tt.steps == nil:
				addr, err := closedAddr()
				if err != nil {
					t.Fatal(err)
				}
				host = addr
			case tt.h2:
				srv = httptestutil.NewTLSServer(tt.steps...)
			default:
				srv = httptestutil.NewServer(tt.steps...)
			}
			if srv != nil {
				defer srv.Close()
				base = srv.Client().Transport.(*http.Transport).Clone()
				base.ForceAttemptHTTP2 = tt.h2
				host = srv.Listener.Addr().String()
			}
			defer base.CloseIdleConnections()
			scheme := "http"
			if tt.h2 {
				scheme = "https"
			}

			var logs bytes.Buffer
			var hooks strings.Builder
			var mu sync.Mutex
			record := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(&hooks, format+"\n", args...)
			}
			tr := &Transport{Base: base, Timeout: 3 * time.Second, AttemptTimeout: 500 * ms, BaseDelay: ms, Jitter: noJitter,
				Logger:   slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
				LogRoute: func(*http.Request) string { return "books" },
				OnAttempt: func(r *http.Request, a Attempt) {
					record("attempt %+v %v", a, a.Err)
				},
				OnDone: func(r *http.Request, o Outcome) { record("done %+v %v", o, o.Err) },
			}
			var body io.Reader
			if tt.method == "POST" {
				body = strings.NewReader(`{"card":"4242"}`)
			}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), tt.method,
				scheme+"://alice:hunter2@"+host+"/v1/books?api_key=s3cr3t-token", body)
			req.Header.Set("Authorization", "Bearer abc.def")
			req.Header.Set("Cookie", "session=xyz")
			req.Header.Set("Proxy-Authorization", "Basic cHJveHk=")
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				readBody(t, resp)
			}

			seen := []string{logs.String(), hooks.String(), fmt.Sprintf("%+v", o), fmt.Sprint(o.Err)}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v; want a *Error", err)
				}
				seen = append(seen, err.Error(), fmt.Sprintf("%+v", e), fmt.Sprint(errors.Unwrap(err)))
			}
			all := strings.Join(seen, "\n")
			for _, s := range hostileSecrets {
				if strings.Contains(all, s) {
					t.Errorf("secret %q leaked in:\n%s", s, all)
				}
			}
			// The test can fail: the secrets went out, and the records came.
			var reqs []httptestutil.Request
			if srv != nil {
				reqs = srv.Requests()
			}
			if len(reqs) > 0 {
				q := reqs[0]
				if q.Header.Get("Authorization") != "Bearer abc.def" || q.RawQuery != "api_key=s3cr3t-token" {
					t.Errorf("the server saw %v ?%s; want the credentials sent", q.Header, q.RawQuery)
				}
			}
			if o.Attempts < 2 && o.Reason != NotIdempotent && o.Reason != Final {
				t.Errorf("outcome %+v; want a retried operation", o)
			}
			// Only a first-attempt final stop (the HTTP/2 stream reset,
			// see TestFaultMatrix) leaves no log record.
			logged := o.Reason != Final || o.Attempts > 1
			if logged && !strings.Contains(logs.String(), `"route":"books"`) || !strings.Contains(hooks.String(), "done") {
				t.Errorf("logs %q, hooks %q; want records carrying the route", logs.String(), hooks.String())
			}
			if strings.Contains(logs.String(), "/v1/books") {
				t.Errorf("logs %q carry the path; want the route LogRoute names only", logs.String())
			}
		})
	}
}

func TestAttemptRetryAfterIsTheServersPartOfTheWait(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 429, RetryAfter: "2"},
		httptestutil.Step{Err: httptestutil.ErrReset},
		httptestutil.Step{Status: 200})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Jitter: waits(70 * ms), OnAttempt: log.onAttempt}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 2*time.Second+70*ms)
	advance(t, fc, 1, 70*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	want := []struct{ wait, retryAfter time.Duration }{
		{2*time.Second + 70*ms, 2 * time.Second}, // the server's 2 s, then the jitter
		{70 * ms, 0},                             // the Transport's own backoff
		{0, 0},                                   // none follows
	}
	if len(log.attempts) != len(want) {
		t.Fatalf("%d attempts reported; want %d", len(log.attempts), len(want))
	}
	for i, w := range want {
		if a := log.attempts[i]; a.Wait != w.wait || a.RetryAfter != w.retryAfter {
			t.Errorf("attempt %d: Wait %v, RetryAfter %v; want %v, %v", i+1, a.Wait, a.RetryAfter, w.wait, w.retryAfter)
		}
	}
}

func TestOnAttemptStartPrecedesEachAttempt(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	tr := &Transport{
		Base: base, Jitter: noJitter,
		OnAttemptStart: func(req *http.Request, n int) {
			record(fmt.Sprintf("start %d %s", n, req.URL.Host))
			if got := len(base.Requests()); got != n-1 {
				t.Errorf("attempt %d started after %d requests were sent; want %d", n, got, n-1)
			}
		},
		OnAttempt: func(_ *http.Request, a Attempt) { record(fmt.Sprintf("end %d %d", a.Number, a.Status)) },
	}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	want := []string{"start 1 api.test", "end 1 503", "start 2 api.test", "end 2 200"}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("hooks ran as %q; want %q", events, want)
	}
}

// TestLogsNeverCarryThePath: a path can carry identifiers and tokens, so
// without LogRoute a record names no route at all, and never the path.
func TestLogsNeverCarryThePath(t *testing.T) {
	t.Parallel()
	var sink bytes.Buffer
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503})
	tr := &Transport{Base: base, Jitter: noJitter, BaseDelay: ms, Logger: slog.New(slog.NewJSONHandler(&sink, nil))}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/reset/tok-7f3a9c/alice@example.com", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	out := sink.String()
	if n := strings.Count(out, "\n"); n != 3 {
		t.Fatalf("%d records; want 2 retries and 1 stop: %s", n, out)
	}
	for _, secret := range []string{"tok-7f3a9c", "alice", "/reset", `"route"`, `"path"`} {
		if strings.Contains(out, secret) {
			t.Errorf("logs carry %q: %s", secret, out)
		}
	}
}

// TestConcurrentObservedOperations: many concurrent operations of one
// Transport, idempotent and not, with OnAttempt, IdleTimeout and
// Propagate, against a server that fails a third of them twice, report every
// attempt of their own and no other (each attempt's Retry-Attempt header
// is the count OnAttempt saw), under -race.
func TestConcurrentObservedOperations(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				// A third of the operations fail their first two attempts.
				if op, _ := strconv.Atoi(r.Header.Get("X-Op")); op%3 == 0 && r.Header.Get(AttemptHeader) < "3" {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("X-Attempt", r.Header.Get(AttemptHeader))
				io.WriteString(w, r.Header.Get("X-Op"))
			}))
			type seen struct {
				mu       sync.Mutex
				attempts int
			}
			tr := &Transport{Base: serverBase(t, srv), Jitter: noJitter, BaseDelay: time.Millisecond,
				IdleTimeout: 5 * time.Second, Propagate: true, Timeout: 20 * time.Second,
				Budget: Unlimited, MaxAttempts: 5,
				NewIdempotencyKey: RandomKey,
				OnAttempt: func(req *http.Request, a Attempt) {
					s := req.Context().Value(seenKey{}).(*seen)
					s.mu.Lock()
					s.attempts++
					s.mu.Unlock()
				}}
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Go(func() {
					s := &seen{}
					method := "GET"
					if i%2 == 1 {
						method = "POST"
					}
					ctx := context.WithValue(context.Background(), seenKey{}, s)
					req := newRequest(t, ctx, method, srv.URL, strings.NewReader("b"))
					req.Header.Set("X-Op", fmt.Sprint(i))
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Errorf("op %d: %v", i, err)
						return
					}
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					if err != nil || string(body) != fmt.Sprint(i) {
						t.Errorf("op %d: body %q, %v", i, body, err)
					}
					s.mu.Lock()
					defer s.mu.Unlock()
					if got := resp.Header.Get("X-Attempt"); got != fmt.Sprint(s.attempts) {
						t.Errorf("op %d: answered attempt %s; OnAttempt saw %d", i, got, s.attempts)
					}
				})
			}
			wg.Wait()
		})
	}
}

type seenKey struct{}
