package promretry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// These tests send scripted operations through a real httpretry.Transport,
// then scrape a real promhttp handler and check every series of the
// families involved.

const ms = time.Millisecond

func TestFailFailSuccessOverLoopback(t *testing.T) {
	srv := httptestutil.NewServer(
		httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200, Body: "ok"})
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	c, reg := newCollector(t, Options{})
	tr := &httpretry.Transport{Base: base, Jitter: noJitter}
	c.Instrument(tr)

	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/books/b1?secret=s3")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || srv.Hits() != 3 {
		t.Fatalf("status %d after %d hits; want 200 after 3", resp.StatusCode, srv.Hits())
	}

	u, _ := url.Parse(srv.URL)
	route := `route="` + u.Host + `"`
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="GET",outcome="success",reason="final",` + route + `}`: 1,
	})
	checkFamily(t, all, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",` + route + `}`:   1,
		`httpretry_attempts_total{kind="retry",method="GET",result="5xx",` + route + `}`:     1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",` + route + `}`: 1,
	})
	checkFamily(t, all, "httpretry_attempts_started_total", map[string]float64{
		`httpretry_attempts_started_total{kind="initial",method="GET",` + route + `}`: 1,
		`httpretry_attempts_started_total{kind="retry",method="GET",` + route + `}`:   2,
	})
	checkFamily(t, all, "httpretry_attempts_in_flight", map[string]float64{
		`httpretry_attempts_in_flight{` + route + `}`: 0,
	})
	checkFamily(t, all, "httpretry_operation_duration_seconds_count", map[string]float64{
		`httpretry_operation_duration_seconds_count{outcome="success",` + route + `}`: 1,
	})
	// Only the retry succeeded: the initial series does not even exist.
	checkFamily(t, all, "httpretry_attempt_successes_total", map[string]float64{
		`httpretry_attempt_successes_total{kind="retry",method="GET",` + route + `}`: 1,
	})
	checkFamily(t, all, "httpretry_operation_attempts_bucket", map[string]float64{
		`httpretry_operation_attempts_bucket{le="1",` + route + `}`:    0,
		`httpretry_operation_attempts_bucket{le="2",` + route + `}`:    0,
		`httpretry_operation_attempts_bucket{le="3",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="4",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="5",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="6",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="7",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="8",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="9",` + route + `}`:    1,
		`httpretry_operation_attempts_bucket{le="10",` + route + `}`:   1,
		`httpretry_operation_attempts_bucket{le="+Inf",` + route + `}`: 1,
	})
	if got := all[`httpretry_operation_attempts_sum{`+route+`}`]; got != 3 {
		t.Errorf("attempts sum = %v; want 3", got)
	}
	if got := sum(all, "httpretry_attempt_duration_seconds_count", route); got != 3 {
		t.Errorf("attempt latency observations = %v; want 3", got)
	}
	if got := all[`httpretry_operation_wait_seconds_bucket{le="0",`+route+`}`]; got != 1 {
		t.Errorf("operations in the zero-wait bucket = %v; want 1", got)
	}
	checkFamily(t, all, "httpretry_attempt_timeouts_total", map[string]float64{})
	for k := range all {
		if strings.Contains(k, "books") || strings.Contains(k, "secret") {
			t.Errorf("series %s carries the path or query", k)
		}
	}
}

func TestBudgetExhausted(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	// One token, no replenishment: the first operation retries once, then
	// both stop for the budget.
	budget := httpretry.NewTokenBucket(1, 0)
	c, reg := newCollector(t, Options{Budget: budget})
	tr := &httpretry.Transport{Base: base, Clock: fc, Budget: budget, Jitter: noJitter}
	c.Instrument(tr)
	for range 2 {
		r := await(t, start(tr, mustRequest(t, context.Background(), "GET", "http://api.test/books/1")))
		if r.err != nil || r.resp.StatusCode != 503 {
			t.Fatalf("got %v, %v; want the 503", r.resp, r.err)
		}
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="GET",outcome="error_response",reason="budget_exhausted",route="api.test"}`: 2,
	})
	checkFamily(t, all, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",route="api.test"}`: 2,
		`httpretry_attempts_total{kind="retry",method="GET",result="5xx",route="api.test"}`:   1,
	})
	checkFamily(t, all, "httpretry_attempt_successes_total", map[string]float64{})
	checkFamily(t, all, "httpretry_budget_tokens", map[string]float64{`httpretry_budget_tokens`: 0})
	if got := all[`httpretry_operation_attempts_sum{route="api.test"}`]; got != 3 {
		t.Errorf("attempts sum = %v; want 3", got)
	}
}

func TestDeadlineExhausted(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	c, reg := newCollector(t, Options{})
	// Attempt 1 at 0, a 300ms wait (300+100 fits in 900), attempt 2 at
	// 300ms; the next wait of 600ms plus 100ms does not fit in the 600ms
	// left.
	tr := &httpretry.Transport{Base: base, Clock: fc, Timeout: 900 * ms, BaseDelay: 300 * ms,
		Jitter: identity, Budget: httpretry.Unlimited}
	c.Instrument(tr)
	ch := start(tr, mustRequest(t, context.Background(), "GET", "http://api.test/"))
	advance(t, fc, 2, 300*ms) // the operation's deadline and the wait
	if r := await(t, ch); r.err != nil || r.resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the 503", r.resp, r.err)
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="GET",outcome="error_response",reason="deadline_exhausted",route="api.test"}`: 1,
	})
	checkFamily(t, all, "httpretry_operation_wait_seconds_sum", map[string]float64{
		`httpretry_operation_wait_seconds_sum{route="api.test"}`: 0.3,
	})
	checkFamily(t, all, "httpretry_operation_duration_seconds_sum", map[string]float64{
		`httpretry_operation_duration_seconds_sum{outcome="error_response",route="api.test"}`: 0.3,
	})
	if got := all[`httpretry_operation_wait_seconds_bucket{le="0.25",route="api.test"}`]; got != 0 {
		t.Errorf("operations waiting at most 250ms = %v; want 0", got)
	}
	if got := all[`httpretry_operation_wait_seconds_bucket{le="0.5",route="api.test"}`]; got != 1 {
		t.Errorf("operations waiting at most 500ms = %v; want 1", got)
	}
}

func TestAttemptTimeout(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang}, httptestutil.Step{Status: 200})
	c, reg := newCollector(t, Options{})
	tr := &httpretry.Transport{Base: base, Clock: fc, AttemptTimeout: time.Second, Jitter: noJitter}
	c.Instrument(tr)
	ch := start(tr, mustRequest(t, context.Background(), "GET", "http://api.test/"))
	advanceAt(t, fc, base, 1, 1, time.Second) // the first attempt's time limit
	if r := await(t, ch); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want the 200", r.resp, r.err)
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_attempt_timeouts_total", map[string]float64{
		`httpretry_attempt_timeouts_total{kind="attempt",method="GET",route="api.test"}`: 1,
	})
	checkFamily(t, all, "httpretry_attempt_successes_total", map[string]float64{
		`httpretry_attempt_successes_total{kind="retry",method="GET",route="api.test"}`: 1,
	})
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="api.test"}`: 1,
	})
	if got := sum(all, "httpretry_attempt_duration_seconds_sum"); got != 1 {
		t.Errorf("attempt latency sum = %v; want 1 (the timed-out attempt)", got)
	}
}

// TestOutcomeClasses runs operations that end without a response and
// checks that the outcome label says "unknown" exactly when the error
// RoundTrip returned matches httpretry.ErrOutcomeUnknown.
func TestOutcomeClasses(t *testing.T) {
	refused := httptestutil.Step{Err: httptestutil.ErrRefused}
	reset := httptestutil.Step{Err: httptestutil.ErrReset}
	tests := []struct {
		name       string
		method     string
		header     string // an Idempotency-Key to send, if any
		steps      []httptestutil.Step
		configure  func(*httpretry.Transport)
		cancel     bool // cancel the caller's context during the first attempt
		outcome    string
		reason     httpretry.StopReason
		attempts   int
		wantStatus int
	}{
		{name: "keyless POST reset after sending", method: "POST", steps: []httptestutil.Step{reset},
			outcome: "unknown", reason: httpretry.NotIdempotent, attempts: 1},
		{name: "keyless POST refused every time", method: "POST", steps: []httptestutil.Step{refused},
			outcome: "error", reason: httpretry.AttemptsExhausted, attempts: 3},
		{name: "keyless POST refused, then reset", method: "POST", steps: []httptestutil.Step{refused, reset},
			outcome: "unknown", reason: httpretry.NotIdempotent, attempts: 2},
		{name: "keyless POST reset on the last attempt", method: "POST", steps: []httptestutil.Step{refused, refused, reset},
			outcome: "unknown", reason: httpretry.AttemptsExhausted, attempts: 3},
		{name: "POST with a key", method: "POST", header: "k1", steps: []httptestutil.Step{reset},
			outcome: "error", reason: httpretry.AttemptsExhausted, attempts: 3},
		{name: "POST with generated keys", method: "POST", steps: []httptestutil.Step{reset},
			configure: func(t *httpretry.Transport) { t.NewIdempotencyKey = httpretry.RandomKey },
			outcome:   "error", reason: httpretry.AttemptsExhausted, attempts: 3},
		{name: "POST on an always-idempotent Transport", method: "POST", steps: []httptestutil.Step{reset},
			configure: func(t *httpretry.Transport) { t.Idempotent = httpretry.AlwaysIdempotent },
			outcome:   "error", reason: httpretry.AttemptsExhausted, attempts: 3},
		{name: "PUT reset", method: "PUT", steps: []httptestutil.Step{reset},
			outcome: "error", reason: httpretry.AttemptsExhausted, attempts: 3},
		{name: "keyless POST canceled in flight", method: "POST", cancel: true,
			steps:   []httptestutil.Step{{Status: 200, Delay: time.Second}},
			outcome: "unknown", reason: httpretry.Canceled, attempts: 1},
		{name: "GET canceled in flight", method: "GET", cancel: true,
			steps:   []httptestutil.Step{{Status: 200, Delay: time.Second}},
			outcome: "error", reason: httpretry.Canceled, attempts: 1},
		{name: "keyless POST answered 503", method: "POST", steps: []httptestutil.Step{{Status: 503}},
			outcome: "error_response", reason: httpretry.NotIdempotent, attempts: 1, wantStatus: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			c, reg := newCollector(t, Options{})
			tr := &httpretry.Transport{Base: httptestutil.NewTransport(fc, tt.steps...), Clock: fc,
				Jitter: noJitter, Budget: httpretry.Unlimited}
			if tt.configure != nil {
				tt.configure(tr)
			}
			c.Instrument(tr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := mustRequest(t, ctx, tt.method, "http://api.test/orders")
			if tt.header != "" {
				req.Header.Set(httpretry.IdempotencyKeyHeader, tt.header)
			}
			ch := start(tr, req)
			if tt.cancel {
				waitCtx, stop := context.WithTimeout(context.Background(), guard)
				defer stop()
				if err := fc.BlockUntilContext(waitCtx, 1); err != nil {
					t.Fatal(err)
				}
				cancel()
			}
			r := await(t, ch)
			if tt.wantStatus != 0 {
				if r.err != nil || r.resp.StatusCode != tt.wantStatus {
					t.Fatalf("got %v, %v; want status %d", r.resp, r.err, tt.wantStatus)
				}
			} else if r.err == nil {
				t.Fatalf("got a %d response; want an error", r.resp.StatusCode)
			}
			if got, want := errors.Is(r.err, httpretry.ErrOutcomeUnknown), tt.outcome == "unknown"; got != want {
				t.Fatalf("errors.Is(err, ErrOutcomeUnknown) = %v for %v; the test expects %v", got, r.err, want)
			}
			all := samples(scrape(t, reg))
			checkFamily(t, all, "httpretry_operations_total", map[string]float64{
				`httpretry_operations_total{method="` + tt.method + `",outcome="` + tt.outcome +
					`",reason="` + string(tt.reason) + `",route="api.test"}`: 1,
			})
			if got := all[`httpretry_operation_attempts_sum{route="api.test"}`]; got != float64(tt.attempts) {
				t.Errorf("attempts = %v; want %d", got, tt.attempts)
			}
		})
	}
}

func mustRequest(t *testing.T, ctx context.Context, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
