package otelretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"
)

// TestOperatorScenario runs, through Instrument into one MeterProvider
// and one TracerProvider, a dependency failing twice then answering, a
// quota answering 429 with Retry-After, a connection reset, an operation
// out of time, retries refused by the budget and a Redis-shared budget
// fallen back to its local bucket, then reads the ManualReader and the
// SpanRecorder: the new series with their exact values, and spans named
// and described as the HTTP semantic conventions say.
func TestOperatorScenario(t *testing.T) {
	fc := clockwork.NewFakeClock()
	mp, reader := newReader(t)
	tp, rec := newRecorder(t)
	fleet := &sharedBudget{tokens: 7}
	opts := Options{MeterProvider: mp, TracerProvider: tp, Budget: fleet, SpanKind: trace.SpanKindClient,
		Route: func(r *http.Request) string { return r.URL.Path }}
	m, err := NewMetrics(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	run := func(path string, tr *httpretry.Transport, waits ...time.Duration) {
		t.Helper()
		tr.Clock, tr.BaseDelay, tr.Jitter = fc, 100*ms, fullWindow
		tr.OnAttemptStart, tr.OnAttempt, tr.OnWait, tr.OnDone = m.OnAttemptStart, m.OnAttempt, m.OnWait, m.OnDone
		w := Wrap(tr, opts)
		tr.OnAttempt = chainAttempt(nil, m.OnAttempt, w.OnAttempt)
		ch := start(w, newRequest(t, "GET", "http://api.test"+path+"?key=s3cr3t", nil))
		for _, d := range waits {
			advance(t, fc, 1, d)
		}
		if r := await(t, ch); r.err == nil {
			closeResp(r)
		}
	}
	steps := func(s ...httptestutil.Step) *httptestutil.Transport { return httptestutil.NewTransport(fc, s...) }
	run("/flaky", &httpretry.Transport{Base: steps(httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503},
		httptestutil.Step{Status: 200}), Budget: httpretry.Unlimited}, 100*ms, 200*ms)
	run("/quota", &httpretry.Transport{Base: steps(httptestutil.Step{Status: 429, RetryAfter: "2"},
		httptestutil.Step{Status: 200}), Budget: httpretry.Unlimited}, 2100*ms)
	run("/reset", &httpretry.Transport{Base: steps(httptestutil.Step{Err: httptestutil.ErrReset},
		httptestutil.Step{Status: 200}), Budget: httpretry.Unlimited}, 100*ms)
	// 300 ms attempts: the first, a 100 ms wait, the second; the next wait
	// and the minimum attempt time do not fit in the 500 ms Timeout.
	slowTr := &httpretry.Transport{Base: steps(httptestutil.Step{Status: 503, Delay: 200 * ms}),
		Budget: httpretry.Unlimited, Timeout: 500 * ms}
	slowCh := make(chan struct{})
	go func() { defer close(slowCh); run("/slow", slowTr) }()
	advance(t, fc, 2, 200*ms) // the first attempt's 200 ms (the deadline also waits)
	advance(t, fc, 2, 100*ms) // the wait
	advance(t, fc, 2, 200*ms) // the second attempt
	<-slowCh
	run("/budget", &httpretry.Transport{Base: steps(httptestutil.Step{Status: 503}), Budget: httpretry.NewTokenBucket(0, 0)})
	fleet.mu.Lock()
	fleet.state, fleet.err = 1, context.DeadlineExceeded
	fleet.mu.Unlock()
	m.BudgetStateChange("local")

	const (
		flaky  = "url.template=/flaky"
		quota  = "url.template=/quota"
		reset  = "url.template=/reset"
		slow   = "url.template=/slow"
		budget = "url.template=/budget"
	)
	lines := collect(t, reader)
	diffLines(t, filter(lines, "httpretry.client.attempts{"), []string{
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=5xx," + flaky + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=5xx," + flaky + "} 1",
		"httpretry.client.attempts{" + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + flaky + "} 1",
		"httpretry.client.attempts{error.type=429," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=429," + quota + "} 1",
		"httpretry.client.attempts{" + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + quota + "} 1",
		"httpretry.client.attempts{error.type=connection_error," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=connection_error," + reset + "} 1",
		"httpretry.client.attempts{" + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + reset + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=5xx," + slow + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=5xx," + slow + "} 1",
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=5xx," + budget + "} 1",
	})
	diffLines(t, filter(lines, "httpretry.client.attempts.started"), []string{
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + flaky + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + flaky + "} 2",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + quota + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + quota + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + reset + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + reset + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + slow + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=retry," + slow + "} 1",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + budget + "} 1",
	})
	diffLines(t, filter(lines, "httpretry.client.retry.wait"), []string{
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + flaky + "} count=2 sum=0.3 buckets=[0 0 0 1 1 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + quota + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.retry.wait{httpretry.wait.cause=retry_after," + quota + "} count=1 sum=2 buckets=[0 0 0 0 0 0 0 1 0 0 0 0 0 0]",
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + reset + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.retry.wait{httpretry.wait.cause=backoff," + slow + "} count=1 sum=0.1 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
	})
	diffLines(t, filter(lines, "httpretry.client.operations{"), []string{
		"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + flaky + "} 1",
		"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + quota + "} 1",
		"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + reset + "} 1",
		"httpretry.client.operations{" + get + ",httpretry.outcome=error_response,httpretry.stop_reason=deadline_exhausted," + slow + "} 1",
		"httpretry.client.operations{" + get + ",httpretry.outcome=error_response,httpretry.stop_reason=budget_exhausted," + budget + "} 1",
	})
	diffLines(t, filter(lines, "httpretry.client.operation.duration"), []string{
		"httpretry.client.operation.duration{http.response.status_code=200,httpretry.outcome=success," + flaky + "} count=1 sum=0.3 buckets=[0 0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.duration{http.response.status_code=200,httpretry.outcome=success," + quota + "} count=1 sum=2.1 buckets=[0 0 0 0 0 0 0 0 1 0 0 0 0 0 0]",
		"httpretry.client.operation.duration{http.response.status_code=200,httpretry.outcome=success," + reset + "} count=1 sum=0.1 buckets=[0 0 0 0 1 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.duration{error.type=5xx,http.response.status_code=503,httpretry.outcome=error_response," + slow + "} count=1 sum=0.5 buckets=[0 0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.duration{error.type=5xx,http.response.status_code=503,httpretry.outcome=error_response," + budget + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
	})
	diffLines(t, filter(lines, "httpretry.client.attempts.active"), []string{
		"httpretry.client.attempts.active{" + budget + "} 0",
		"httpretry.client.attempts.active{" + flaky + "} 0",
		"httpretry.client.attempts.active{" + quota + "} 0",
		"httpretry.client.attempts.active{" + reset + "} 0",
		"httpretry.client.attempts.active{" + slow + "} 0",
	})
	diffLines(t, filter(lines, "httpretry.client.budget"), []string{
		"httpretry.client.budget.shared{} 0",
		"httpretry.client.budget.state_changes{httpretry.budget.state=local} 1",
	})

	spans := rec.Ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans; want 5", len(spans))
	}
	wantSpan(t, spans[1], "GET /quota client {http.request.method=GET,http.response.status_code=200,httpretry.attempts=2,"+
		"httpretry.outcome=success,httpretry.stop_reason=final,httpretry.waited=2.1,server.address=api.test,server.port=80,"+
		"url.full=http://api.test/quota?key=REDACTED,url.template=/quota} "+
		"event httpretry.retry {httpretry.attempt=1,httpretry.wait=2.1,http.response.status_code=429}")
	wantSpan(t, spans[3], "GET /slow client {error.type=503,http.request.method=GET,http.response.status_code=503,httpretry.attempts=2,"+
		"httpretry.outcome=error_response,httpretry.stop_reason=deadline_exhausted,httpretry.waited=0.1,server.address=api.test,server.port=80,"+
		"url.full=http://api.test/slow?key=REDACTED,url.template=/slow} "+
		"event httpretry.retry {httpretry.attempt=1,httpretry.wait=0.1,http.response.status_code=503} status Error \"\"")
	wantSpan(t, spans[4], "GET /budget client {error.type=503,http.request.method=GET,http.response.status_code=503,httpretry.attempts=1,"+
		"httpretry.outcome=error_response,httpretry.stop_reason=budget_exhausted,httpretry.waited=0,server.address=api.test,server.port=80,"+
		"url.full=http://api.test/budget?key=REDACTED,url.template=/budget} status Error \"\"")
}
