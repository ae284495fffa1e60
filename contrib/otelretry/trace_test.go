package otelretry

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// newRecorder returns a TracerProvider whose ended spans the recorder
// holds.
func newRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, rec
}

// describe renders a span's attributes (sorted by key) and its events,
// each with their attributes, so that a test compares them whole.
func describe(s sdktrace.ReadOnlySpan) string {
	kvs := slices.Clone(s.Attributes())
	slices.SortFunc(kvs, func(a, b attribute.KeyValue) int { return strings.Compare(string(a.Key), string(b.Key)) })
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s {%s}", s.Name(), s.SpanKind(), attrs(kvs))
	for _, e := range s.Events() {
		fmt.Fprintf(&b, " event %s {%s}", e.Name, attrs(e.Attributes))
	}
	if st := s.Status(); st.Code != codes.Unset {
		fmt.Fprintf(&b, " status %s %q", st.Code, st.Description)
	}
	return b.String()
}

// byKind returns the ended spans of one kind, in the order they started.
func byKind(rec *tracetest.SpanRecorder, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

func wantSpan(t *testing.T, s sdktrace.ReadOnlySpan, want string) {
	t.Helper()
	if got := describe(s); got != want {
		t.Errorf("span:\n got %s\nwant %s", got, want)
	}
}

func wantParent(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %q (%s) has parent %s; want %q (%s)", child.Name(), child.SpanKind(),
			child.Parent().SpanID(), parent.Name(), parent.SpanContext().SpanID())
	}
}

// TestTraceOperationOutsideAttemptsInside is the recommended composition:
// the operation span (internal) outside the retrying Transport, one
// otelhttp client span per attempt inside it, numbered by Attempts.
func TestTraceOperationOutsideAttemptsInside(t *testing.T) {
	tp, rec := newRecorder(t)
	mp, _ := newReader(t)
	fc := clockwork.NewFakeClock()
	script := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200, Body: "ok"})
	tr := &httpretry.Transport{
		Base:  otelhttp.NewTransport(Attempts(script), otelhttp.WithTracerProvider(tp)),
		Clock: fc, Jitter: fullWindow,
	}
	rt, err := Instrument(tr, Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	req := newRequest(t, "GET", "http://api.test/books/1?token=secret", nil).WithContext(ctx)
	ch := start(rt, req)
	advance(t, fc, 1, 100*ms)
	advance(t, fc, 1, 200*ms)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("RoundTrip = %v, %v; want 200", r.resp, r.err)
	}
	closeResp(r) // ends the last attempt's span
	caller.End()

	ops := byKind(rec, trace.SpanKindInternal)
	attempts := byKind(rec, trace.SpanKindClient)
	if len(ops) != 2 || len(attempts) != 3 {
		t.Fatalf("got %d internal and %d client spans; want 2 (caller, operation) and 3 (attempts)", len(ops), len(attempts))
	}
	callerSpan, op := ops[0], ops[1]
	wantParent(t, op, callerSpan)
	wantSpan(t, op, "GET internal {http.request.method=GET,http.response.status_code=200,"+
		"httpretry.attempts=3,httpretry.outcome=success,httpretry.stop_reason=final,httpretry.waited=0.3,"+
		"server.address=api.test,server.port=80}"+
		" event httpretry.retry {httpretry.attempt=1,httpretry.wait=0.1,http.response.status_code=503}"+
		" event httpretry.retry {httpretry.attempt=2,httpretry.wait=0.2,http.response.status_code=503}")
	for i, a := range attempts {
		wantParent(t, a, op)
		got := attrMap(a)
		resend, ok := got["http.request.resend_count"]
		switch {
		case i == 0 && ok:
			t.Errorf("attempt 1 has http.request.resend_count=%s; want none", resend)
		case i > 0 && resend != fmt.Sprint(i):
			t.Errorf("attempt %d has http.request.resend_count=%q; want %d", i+1, resend, i)
		}
		if want := []string{"503", "503", "200"}[i]; got["http.response.status_code"] != want {
			t.Errorf("attempt %d status = %s; want %s", i+1, got["http.response.status_code"], want)
		}
	}
	// otelhttp's own spans carry url.full, query string included; the
	// operation span never does.
	for _, s := range ops {
		if strings.Contains(describe(s), "secret") {
			t.Errorf("span %q carries the query string: %s", s.Name(), describe(s))
		}
	}
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestTraceOtelhttpOutside is the other composition: otelhttp wraps the
// whole retrying client, so its one client span stands for the operation
// (the conventions' form for clients that cannot trace each attempt), and
// the operation span nests inside it with the retry events.
func TestTraceOtelhttpOutside(t *testing.T) {
	tp, rec := newRecorder(t)
	fc := clockwork.NewFakeClock()
	script := httptestutil.NewTransport(fc, httptestutil.Step{Err: httptestutil.ErrRefused}, httptestutil.Step{Status: 204})
	tr := &httpretry.Transport{Base: script, Clock: fc, Jitter: fullWindow}
	w := Wrap(tr, Options{TracerProvider: tp})
	tr.OnAttempt = w.OnAttempt
	rt := otelhttp.NewTransport(w, otelhttp.WithTracerProvider(tp))

	ch := start(rt, newRequest(t, "DELETE", "https://api.test:8443/books/1", nil))
	advance(t, fc, 1, 100*ms)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 204 {
		t.Fatalf("RoundTrip = %v, %v; want 204", r.resp, r.err)
	}
	closeResp(r)

	clients, ops := byKind(rec, trace.SpanKindClient), byKind(rec, trace.SpanKindInternal)
	if len(clients) != 1 || len(ops) != 1 {
		t.Fatalf("got %d client and %d internal spans; want 1 and 1", len(clients), len(ops))
	}
	wantParent(t, ops[0], clients[0])
	wantSpan(t, ops[0], "DELETE internal {http.request.method=DELETE,http.response.status_code=204,"+
		"httpretry.attempts=2,httpretry.outcome=success,httpretry.stop_reason=final,httpretry.waited=0.1,"+
		"server.address=api.test,server.port=8443}"+
		" event httpretry.retry {httpretry.attempt=1,httpretry.wait=0.1,error.type=connection_refused}")
}

// TestTraceFailures: the operation span's name, status, error.type and
// outcome when the operation fails, with a client span kind for a client
// whose attempts have no spans, and url.full with its userinfo and query
// values redacted.
func TestTraceFailures(t *testing.T) {
	const fullURL = "http://REDACTED:REDACTED@api.test/orders/7?token=REDACTED&page=REDACTED"
	cases := []struct {
		name   string
		method string
		step   httptestutil.Step
		want   string
	}{
		{"unknown outcome", "POST", httptestutil.Step{Err: httptestutil.ErrReset},
			"POST /orders client {error.type=connection_reset,http.request.method=POST,httpretry.attempts=1," +
				"httpretry.outcome=unknown,httpretry.stop_reason=not_idempotent,httpretry.waited=0," +
				"server.address=api.test,server.port=80,url.full=" + fullURL + ",url.template=/orders} status Error \"not_idempotent: connection_reset\""},
		{"final error response", "GET", httptestutil.Step{Status: 404},
			"GET /orders client {error.type=404,http.request.method=GET,http.response.status_code=404,httpretry.attempts=1," +
				"httpretry.outcome=error_response,httpretry.stop_reason=final,httpretry.waited=0," +
				"server.address=api.test,server.port=80,url.full=" + fullURL + ",url.template=/orders} status Error \"\""},
		{"made-up method", "BREW", httptestutil.Step{Status: 200},
			"HTTP /orders client {http.request.method=_OTHER,http.response.status_code=200,httpretry.attempts=1," +
				"httpretry.outcome=success,httpretry.stop_reason=final,httpretry.waited=0," +
				"server.address=api.test,server.port=80,url.full=" + fullURL + ",url.template=/orders}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, rec := newRecorder(t)
			tr := &httpretry.Transport{Base: httptestutil.NewTransport(nil, c.step), MaxAttempts: 2}
			rt := Wrap(tr, Options{TracerProvider: tp, SpanKind: trace.SpanKindClient,
				Route: func(*http.Request) string { return "/orders" }})
			resp, _ := rt.RoundTrip(newRequest(t, c.method, "http://user:pw@api.test/orders/7?token=s3cr3t&page=2#top", strings.NewReader("x")))
			closeResp(result{resp: resp})
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("got %d spans; want 1", len(spans))
			}
			wantSpan(t, spans[0], c.want)
		})
	}
}
