package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Attribute renderings shared by the expected lines below.
const (
	get   = "http.request.method=GET"
	post  = "http.request.method=POST"
	route = "server.address=api.test"
)

// waits returns a Jitter that always waits the whole window, so that
// every wait is known exactly.
func fullWindow(w time.Duration) time.Duration { return w }

func noJitter(time.Duration) time.Duration { return 0 }

// newMetrics returns Metrics on a fresh provider, and its reader.
func newMetrics(t *testing.T, opts Options) (*Metrics, func() []string) {
	t.Helper()
	mp, reader := newReader(t)
	opts.MeterProvider = mp
	m, err := NewMetrics(opts)
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m, func() []string { return collect(t, reader) }
}

// hook installs m's hooks on tr.
func hook(tr *httpretry.Transport, m *Metrics) *httpretry.Transport {
	tr.OnAttemptStart, tr.OnAttempt, tr.OnWait, tr.OnDone = m.OnAttemptStart, m.OnAttempt, m.OnWait, m.OnDone
	return tr
}

func TestMetricsFailFailSuccess(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200, Body: "ok"})
	budget := httpretry.NewTokenBucket(20, 0.1)
	m, metrics := newMetrics(t, Options{Budget: budget})
	tr := hook(&httpretry.Transport{Base: base, Clock: fc, Budget: budget, Jitter: fullWindow}, m)

	ch := start(tr, newRequest(t, "GET", "http://api.test/books/1?token=secret", nil))
	advance(t, fc, 1, 100*ms)
	advance(t, fc, 1, 200*ms)
	r := await(t, ch)
	defer closeResp(r)
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("RoundTrip = %v, %v; want 200", r.resp, r.err)
	}
	diffLines(t, metrics(), []string{
		"httpretry.client.attempt.duration{error.type=5xx,http.response.status_code=503,httpretry.attempt.result=5xx,httpretry.connection=unknown," + route + "} count=2 sum=0 buckets=[2 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{http.response.status_code=200,httpretry.attempt.result=success,httpretry.connection=unknown," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempts.active{" + route + "} 0",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + route + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + route + "} 2",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=5xx," + route + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=5xx," + route + "} 1",
		"httpretry.client.attempts{" + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + route + "} 1",
		"httpretry.client.operation.duration{http.response.status_code=200,httpretry.outcome=success," + route + "} count=1 sum=0.3 buckets=[0 0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.wait{" + route + "} count=1 sum=0.3 buckets=[0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + route + "} 1",
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + route + "} count=2 sum=0.3 buckets=[0 0 0 1 1 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.successes{" + get + ",httpretry.attempt.kind=retry," + route + "} 1",
		"httpretry.client.budget.tokens{} 18",
		"httpretry.client.operation.attempts{" + route + "} count=1 sum=3 buckets=[0 0 1 0]",
	})
}

func TestMetricsBudgetExhausted(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	budget := httpretry.NewTokenBucket(1, 0) // one retry, never replenished
	m, metrics := newMetrics(t, Options{Budget: budget})
	tr := hook(&httpretry.Transport{Base: base, Clock: fc, Budget: budget, Jitter: fullWindow}, m)

	ch := start(tr, newRequest(t, "GET", "http://api.test/books/1", nil))
	advance(t, fc, 1, 100*ms)
	r := await(t, ch)
	defer closeResp(r)
	if r.err != nil || r.resp.StatusCode != 503 {
		t.Fatalf("RoundTrip = %v, %v; want the final 503", r.resp, r.err)
	}
	diffLines(t, metrics(), []string{
		"httpretry.client.attempt.duration{error.type=5xx,http.response.status_code=503,httpretry.attempt.result=5xx,httpretry.connection=unknown," + route + "} count=2 sum=0 buckets=[2 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempts.active{" + route + "} 0",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + route + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + route + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=5xx," + route + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=5xx," + route + "} 1",
		"httpretry.client.operation.duration{error.type=5xx,http.response.status_code=503,httpretry.outcome=error_response," + route + "} count=1 sum=0.1 buckets=[0 0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.wait{" + route + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operations{" + get + ",httpretry.outcome=error_response,httpretry.stop_reason=budget_exhausted," + route + "} 1",
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + route + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.budget.tokens{} 0",
		"httpretry.client.operation.attempts{" + route + "} count=1 sum=2 buckets=[0 1 0 0]",
	})
}

// TestMetricsDeadlineExhausted: an attempt of 300 ms times out, and the
// 200 ms wait plus the 100 ms minimum attempt time do not fit in the
// 200 ms left of a 500 ms Timeout.
func TestMetricsDeadlineExhausted(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
	m, metrics := newMetrics(t, Options{MaxAttempts: 2})
	tr := hook(&httpretry.Transport{Base: base, Clock: fc, MaxAttempts: 2, Timeout: 500 * ms,
		AttemptTimeout: 300 * ms, BaseDelay: 200 * ms, Jitter: fullWindow}, m)

	ch := start(tr, newRequest(t, "GET", "http://api.test/books/1", nil))
	advanceAt(t, fc, base, 1, 2, 300*ms)
	r := await(t, ch)
	var e *httpretry.Error
	if !errors.As(r.err, &e) || e.Reason != httpretry.DeadlineExhausted || e.Attempts != 1 {
		t.Fatalf("err = %v; want deadline_exhausted after 1 attempt", r.err)
	}
	diffLines(t, metrics(), []string{
		"httpretry.client.attempt.duration{error.type=timeout,httpretry.attempt.result=timeout,httpretry.connection=unknown," + route + "} count=1 sum=0.3 buckets=[0 0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempts.active{" + route + "} 0",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + route + "} 1",
		"httpretry.client.attempts{error.type=timeout," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=timeout," + route + "} 1",
		"httpretry.client.operation.duration{error.type=timeout,httpretry.outcome=error," + route + "} count=1 sum=0.3 buckets=[0 0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.wait{" + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.timeouts{" + get + ",httpretry.timeout.kind=attempt," + route + "} 1",
		"httpretry.client.operations{" + get + ",httpretry.outcome=error,httpretry.stop_reason=deadline_exhausted," + route + "} 1",
		"httpretry.client.operation.attempts{" + route + "} count=1 sum=1 buckets=[1 0 0]",
	})
}

// TestMetricsCanceledInWait: the caller leaves during the wait after a
// 503. The operation counts as canceled with outcome error: the caller got
// an error, not the 503, which was drained.
func TestMetricsCanceledInWait(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	m, metrics := newMetrics(t, Options{})
	tr := hook(&httpretry.Transport{Base: base, Clock: fc, Jitter: fullWindow}, m)
	ctx, cancel := context.WithCancel(context.Background())
	ch := start(tr, newRequest(t, "GET", "http://api.test/", nil).WithContext(ctx))
	advance(t, fc, 1, 40*ms) // the wait of 100ms has begun
	cancel()
	r := await(t, ch)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", r.err)
	}
	diffLines(t, filter(metrics(), "httpretry.client.operation"), []string{
		"httpretry.client.operation.attempts{" + route + "} count=1 sum=1 buckets=[1 0 0 0]",
		"httpretry.client.operation.duration{error.type=canceled,httpretry.outcome=error," + route + "} count=1 sum=0.04 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.wait{" + route + "} count=1 sum=0.04 buckets=[0 0 1 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operations{" + get + ",httpretry.outcome=error,httpretry.stop_reason=canceled," + route + "} 1",
	})
}

// TestMetricsUnknownOutcome checks the outcome class against the
// Transport's own verdict, ErrOutcomeUnknown, in both directions: a POST
// reset after it may have arrived is unknown; a POST whose connection was
// refused never left, is retried, and is a plain error.
func TestMetricsUnknownOutcome(t *testing.T) {
	cases := []struct {
		name      string
		step      httptestutil.Step
		attempts  int
		unknown   bool
		wantLines []string
	}{
		{"reset after sending", httptestutil.Step{Err: httptestutil.ErrReset}, 1, true, []string{
			"httpretry.client.attempt.duration{error.type=connection_error,httpretry.attempt.result=connection_error,httpretry.connection=unknown," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
			"httpretry.client.attempts.active{" + route + "} 0",
			"httpretry.client.attempts.started{" + post + ",httpretry.attempt.kind=initial," + route + "} 1",
			"httpretry.client.attempts{error.type=connection_error," + post + ",httpretry.attempt.kind=initial,httpretry.attempt.result=connection_error," + route + "} 1",
			"httpretry.client.operation.duration{error.type=connection_error,httpretry.outcome=unknown," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
			"httpretry.client.operation.wait{" + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
			"httpretry.client.operation.attempts{" + route + "} count=1 sum=1 buckets=[1 0 0]",
			"httpretry.client.operations{" + post + ",httpretry.outcome=unknown,httpretry.stop_reason=not_idempotent," + route + "} 1",
		}},
		{"refused: never sent", httptestutil.Step{Err: httptestutil.ErrRefused}, 2, false, []string{
			"httpretry.client.attempt.duration{error.type=connection_error,httpretry.attempt.result=connection_error,httpretry.connection=unknown," + route + "} count=2 sum=0 buckets=[2 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
			"httpretry.client.attempts.active{" + route + "} 0",
			"httpretry.client.attempts.started{" + post + ",httpretry.attempt.kind=initial," + route + "} 1",
			"httpretry.client.attempts.started{" + post + ",httpretry.attempt.kind=retry," + route + "} 1",
			"httpretry.client.attempts{error.type=connection_error," + post + ",httpretry.attempt.kind=initial,httpretry.attempt.result=connection_error," + route + "} 1",
			"httpretry.client.attempts{error.type=connection_error," + post + ",httpretry.attempt.kind=retry,httpretry.attempt.result=connection_error," + route + "} 1",
			"httpretry.client.operation.duration{error.type=connection_error,httpretry.outcome=error," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
			"httpretry.client.operation.wait{" + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
			"httpretry.client.operation.attempts{" + route + "} count=1 sum=2 buckets=[0 1 0]",
			"httpretry.client.operations{" + post + ",httpretry.outcome=error,httpretry.stop_reason=attempts_exhausted," + route + "} 1",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, c.step)
			m, metrics := newMetrics(t, Options{MaxAttempts: 2})
			tr := hook(&httpretry.Transport{Base: base, Clock: fc, MaxAttempts: 2, Jitter: noJitter}, m)
			_, err := tr.RoundTrip(newRequest(t, "POST", "http://api.test/orders", strings.NewReader("x")))
			if got := errors.Is(err, httpretry.ErrOutcomeUnknown); got != c.unknown {
				t.Fatalf("errors.Is(%v, ErrOutcomeUnknown) = %v; want %v", err, got, c.unknown)
			}
			if got := base.Hits(); got != c.attempts {
				t.Errorf("hits = %d; want %d", got, c.attempts)
			}
			diffLines(t, metrics(), c.wantLines)
		})
	}
}

// TestMetricsAttemptDetails records synthetic attempts, with the
// connection fields a Base built on net/http reports, through the hooks.
func TestMetricsAttemptDetails(t *testing.T) {
	m, metrics := newMetrics(t, Options{})
	req := newRequest(t, "GET", "http://api.test/", nil)
	m.OnAttempt(req, httpretry.Attempt{Number: 1, Err: fmt.Errorf("stalled: %w", httpretry.ErrIdleTimeout),
		Duration: 2 * time.Second, Wait: 100 * ms, Conn: httpretry.ConnNew,
		ConnWait: 20 * ms, DNS: 3 * ms, Connect: 5 * ms, TLSHandshake: 10 * ms})
	m.OnWait(req, httpretry.Wait{After: 1, Waited: 100 * ms})
	m.OnAttempt(req, httpretry.Attempt{Number: 2, Status: 404, Duration: 40 * ms,
		Conn: httpretry.ConnReused, ConnWait: 500 * time.Microsecond, FirstByte: 30 * ms})
	m.OnAttempt(req, httpretry.Attempt{Number: 3, Status: 200, Duration: 7 * ms, Conn: httpretry.ConnReused, FirstByte: 6 * ms})
	diffLines(t, metrics(), []string{
		"httpretry.client.attempt.duration{error.type=4xx,http.response.status_code=404,httpretry.attempt.result=4xx,httpretry.connection=reused," + route + "} count=1 sum=0.04 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{error.type=idle_timeout,httpretry.attempt.result=idle_timeout,httpretry.connection=new," + route + "} count=1 sum=2 buckets=[0 0 0 0 0 0 0 0 1 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{http.response.status_code=200,httpretry.attempt.result=success,httpretry.connection=reused," + route + "} count=1 sum=0.007 buckets=[0 1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempts.active{" + route + "} -3",
		"httpretry.client.attempts{error.type=4xx," + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=4xx," + route + "} 1",
		"httpretry.client.attempts{error.type=idle_timeout," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=idle_timeout," + route + "} 1",
		"httpretry.client.attempts{" + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + route + "} 1",
		"httpretry.client.attempt.timeouts{" + get + ",httpretry.timeout.kind=idle," + route + "} 1",
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + route + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.phase.duration{httpretry.phase=conn_wait} count=2 sum=0.0205 buckets=[1 0 0 0 1 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.phase.duration{httpretry.phase=connect} count=1 sum=0.005 buckets=[0 0 1 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.phase.duration{httpretry.phase=dns} count=1 sum=0.003 buckets=[0 0 1 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.phase.duration{httpretry.phase=first_byte} count=2 sum=0.036 buckets=[0 0 0 1 0 1 0 0 0 0 0 0]",
		"httpretry.client.attempt.phase.duration{httpretry.phase=tls} count=1 sum=0.01 buckets=[0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.successes{" + get + ",httpretry.attempt.kind=retry," + route + "} 1",
	})
}

// TestMetricsBoundedAttributes: methods outside the standard set, routes
// past the cap and unusable route values share one series each; the
// default route is the host alone, never its port, userinfo, path or
// query.
func TestMetricsBoundedAttributes(t *testing.T) {
	t.Run("default route is the host", func(t *testing.T) {
		m, metrics := newMetrics(t, Options{})
		for _, u := range []string{"http://user:pw@api.test/a?token=secret", "http://api.test:8443/b", "http://api.test/c"} {
			req := newRequest(t, "GET", u, nil)
			m.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200})
		}
		lines := metrics()
		for _, l := range lines {
			if strings.Contains(l, "secret") || strings.Contains(l, "pw") || strings.Contains(l, "/a") {
				t.Errorf("series %q leaks the URL", l)
			}
		}
		diffLines(t, filter(lines, "httpretry.client.operations{"), []string{
			"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + route + "} 3",
		})
	})
	t.Run("caps and fixed tables", func(t *testing.T) {
		m, metrics := newMetrics(t, Options{MaxRoutes: 2, Route: func(r *http.Request) string { return r.Header.Get("Route") }})
		for _, c := range []struct{ method, route string }{
			{"GET", "/a"}, {"GET", "/b"}, {"GET", "/c"}, {"GET", "/a"}, {"GET", ""},
			{"GET", strings.Repeat("x", 129)}, {"GET", "\xff"}, {"BREW", "/a"}, {"", "/b"},
		} {
			req := newRequest(t, "GET", "http://api.test/", nil)
			req.Method = c.method
			req.Header.Set("Route", c.route)
			m.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: "made_up", Status: 200})
		}
		diffLines(t, filter(metrics(), "httpretry.client.operations{"), []string{
			"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=other,url.template=/a} 2",
			"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=other,url.template=/b} 2",
			"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=other,url.template=other} 4",
			"httpretry.client.operations{http.request.method=_OTHER,httpretry.outcome=success,httpretry.stop_reason=other,url.template=/a} 1",
		})
	})
}

// filter keeps the lines that start with prefix.
func filter(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestMetricsCardinality: a thousand distinct paths used as routes make
// at most MaxRoutes + 1 route values, whatever the traffic.
func TestMetricsCardinality(t *testing.T) {
	m, metrics := newMetrics(t, Options{Route: func(r *http.Request) string { return r.URL.Path }})
	for i := range 3000 {
		req := newRequest(t, []string{"GET", "PUT", "DELETE"}[i%3], fmt.Sprintf("http://api.test/books/%d", i/3), nil)
		m.OnAttempt(req, httpretry.Attempt{Number: 1, Status: 200})
		m.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200})
	}
	routes := map[string]bool{}
	var ops int
	for _, l := range metrics() {
		if strings.HasPrefix(l, "httpretry.client.operations{") {
			ops++
		}
		if i := strings.Index(l, "url.template="); i >= 0 {
			routes[strings.FieldsFunc(l[i:], func(r rune) bool { return r == ',' || r == '}' })[0]] = true
		}
	}
	if len(routes) != DefaultMaxRoutes+1 || !routes["url.template=other"] {
		t.Errorf("%d route values (other included: %v); want %d", len(routes), routes["url.template=other"], DefaultMaxRoutes+1)
	}
	if want := (DefaultMaxRoutes + 1) * 3; ops != want {
		t.Errorf("%d operation series; want %d (101 routes × 3 methods)", ops, want)
	}
	// Paths 100 to 999, three operations each, overflowed the cap.
	diffLines(t, filter(metrics(), "httpretry.client.route"), []string{"httpretry.client.route.overflows{} 2700"})
}

// TestMetricsRetryAfterAndActive: a 429 whose Retry-After the Transport
// honours is a wait with cause retry_after, its attempt a 429 result; an
// attempt that hangs is active while it hangs.
func TestMetricsRetryAfterAndActive(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 429, RetryAfter: "2"},
		httptestutil.Step{Action: httptestutil.Hang})
	m, metrics := newMetrics(t, Options{})
	tr := hook(&httpretry.Transport{Base: base, Clock: fc, BaseDelay: 100 * ms, Jitter: fullWindow}, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := start(tr, newRequest(t, "GET", "http://api.test/", nil).WithContext(ctx))
	advance(t, fc, 1, 2100*ms) // the server's 2 s and the 100 ms jitter
	for deadline := time.Now().Add(30 * time.Second); base.Hits() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the retry never reached the base")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	diffLines(t, filter(metrics(), "httpretry.client.attempts"), []string{
		"httpretry.client.attempts.active{" + route + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + route + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + route + "} 1",
		"httpretry.client.attempts{error.type=429," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=429," + route + "} 1",
	})
	diffLines(t, filter(metrics(), "httpretry.client.retry"), []string{
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + route + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.retry.wait{httpretry.wait.cause=retry_after," + route + "} count=1 sum=2 buckets=[0 0 0 0 0 0 0 1 0 0 0 0 0 0]",
	})
	cancel()
	if r := await(t, ch); r.err == nil {
		t.Fatal("a canceled hang returned a response")
	}
	diffLines(t, filter(metrics(), "httpretry.client.attempts.active"), []string{
		"httpretry.client.attempts.active{" + route + "} 0",
	})
}

// TestMeterSchemaURL: the meter, like the tracer, names the semantic
// conventions' version its attribute names follow.
func TestMeterSchemaURL(t *testing.T) {
	mp, reader := newReader(t)
	m, err := NewMetrics(Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	m.OnDone(newRequest(t, "GET", "http://api.test/", nil), httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.SchemaURL != semconv.SchemaURL {
		t.Errorf("scopes %+v; want one with schema URL %s", rm.ScopeMetrics, semconv.SchemaURL)
	}
}

// TestAttributesTellClientsApart: two Metrics on one MeterProvider, told
// apart by Options.Attributes, keep their own counts under their own
// instrumentation scope.
func TestAttributesTellClientsApart(t *testing.T) {
	mp, reader := newReader(t)
	clients := map[string]int{"payments": 2, "search": 1}
	for name, n := range clients {
		m, err := NewMetrics(Options{MeterProvider: mp, Attributes: []attribute.KeyValue{attribute.String("client", name)}})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			m.OnDone(newRequest(t, "GET", "http://api.test/", nil), httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200})
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		client, _ := sm.Scope.Attributes.Value("client")
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "httpretry.client.operations" {
				for _, p := range sum.DataPoints {
					got[client.AsString()] += p.Value
				}
			}
		}
	}
	if got["payments"] != 2 || got["search"] != 1 || len(got) != 2 {
		t.Errorf("operations by client scope = %v; want payments 2, search 1", got)
	}
}
