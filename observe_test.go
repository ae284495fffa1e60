package httpretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
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
	tr := &Transport{Base: base, Clock: fc, Timeout: 10 * time.Second, Jitter: waits(20*ms, 30*ms), Logger: slog.New(h)}
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
		{"method": "GET", "host": "api.test", "path": "/books/b1", "attempt": "1", "status": "503", "wait": "20ms", "time_left": "10s"},
		{"method": "GET", "host": "api.test", "path": "/books/b1", "attempt": "2", "error": "connection_reset", "wait": "30ms", "time_left": "9.98s"},
		{"method": "GET", "host": "api.test", "path": "/books/b1", "attempt": "3", "status": "503", "time_left": "9.95s", "reason": "attempts_exhausted"},
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
				Logger: slog.New(slog.NewTextHandler(&sink, nil)), OnAttempt: log.onAttempt, OnDone: log.onDone}
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
			if !strings.Contains(sink.String(), "path=/v1/books") {
				t.Errorf("log lacks the path: %s", sink.String())
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
