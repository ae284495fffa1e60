package otelretry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span and event attribute keys of this package's own.
const (
	keyAttempts = attribute.Key("httpretry.attempts")
	keyWaited   = attribute.Key("httpretry.waited")
	keyAttempt  = attribute.Key("httpretry.attempt")
	keyWait     = attribute.Key("httpretry.wait")
)

// RetryEvent is the name of the span event that marks each wait before a
// retry, on the operation span.
const RetryEvent = "httpretry.retry"

// spanMethods are the method part of the operation span names, by
// method index, as the HTTP semantic conventions spell it: the method,
// and "HTTP" for a method outside the standard set, whose name could be
// anything.
var spanMethods = func() (n [labels.NumMethods]string) {
	copy(n[:], methods[:labels.NumMethods-1])
	n[labels.NumMethods-1] = "HTTP"
	return n
}()

// spanName is the conventions' span name: "{method} {url.template}" when
// the route is a template, else "{method}".
func spanName(method int, template string) string {
	if template == "" {
		return spanMethods[method]
	}
	return spanMethods[method] + " " + template
}

// Transport is an [http.RoundTripper] that runs each operation of the
// RoundTripper it wraps (an [*httpretry.Transport], or anything with one
// inside) in one span, named "{method} {url.template}" (or "{method}"
// without a route) as the HTTP semantic conventions name spans, in the
// request's context before the first attempt starts. Every attempt's
// context derives from
// it, so attempt spans that otelhttp creates below the retrying Transport
// nest under it, and [Attempts] can number them.
//
// The span carries http.request.method, server.address, server.port,
// url.template (when Options.Route is set), url.full, redacted (when the
// span is a client span), and, when the operation ends:
// httpretry.attempts, httpretry.stop_reason, httpretry.outcome,
// httpretry.waited (seconds), http.response.status_code of the response
// returned, and error.type when it failed; its status is Error unless the
// operation ended with a response below 400. Each wait before a retry is
// a [RetryEvent] event, added by the OnAttempt hook. The span ends when
// RoundTrip returns, as [httpretry.Outcome.Elapsed] does; reading the
// body belongs to the last attempt's span.
//
// Create one with [Wrap] (or [Instrument], which also installs the
// hooks). A Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	base   http.RoundTripper
	tracer trace.Tracer
	kind   trace.SpanKind
	route  func(*http.Request) string
	off    bool // traces are off: the provider is a no-op one
}

// Wrap returns a Transport that runs each operation of rt in a span from
// opts.TracerProvider. To get the retry events, set the retrying
// Transport's OnAttempt to the returned Transport's OnAttempt (or use
// [Instrument]). A nil rt means [http.DefaultTransport].
func Wrap(rt http.RoundTripper, opts Options) *Transport {
	if rt == nil {
		rt = http.DefaultTransport
	}
	tp := opts.tracerProvider()
	_, off := tp.(noop.TracerProvider)
	return &Transport{
		base: rt,
		tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL),
			trace.WithInstrumentationAttributes(opts.Attributes...)),
		kind:  opts.spanKind(),
		route: opts.Route,
		off:   off,
	}
}

// operation is the per-operation state a Transport puts in the request's
// context: the span, the attempt counter Attempts reads, and the Outcome
// the retrying Transport fills.
type operation struct {
	span     trace.Span
	attempts atomic.Int32
	outcome  httpretry.Outcome
}

type operationKey struct{}

func operationFrom(ctx context.Context) *operation {
	op, _ := ctx.Value(operationKey{}).(*operation)
	return op
}

// RoundTrip starts the operation span, sends req through the wrapped
// RoundTripper with the span in its context, and ends the span with what
// the operation did. It never modifies req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.off {
		// Traces off: no span to open, annotate or end, so nothing to
		// spend on one (the operation state, its context, attributes).
		return t.base.RoundTrip(req)
	}
	op := &operation{}
	m := labels.Method(req.Method)
	template := t.template(req)
	ctx, span := t.tracer.Start(req.Context(), spanName(m, template),
		trace.WithSpanKind(t.kind), trace.WithAttributes(t.startAttributes(req, m, template)...))
	op.span = span
	ctx = context.WithValue(ctx, operationKey{}, op)
	ctx = httpretry.WithOutcome(ctx, &op.outcome)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	t.end(op, resp, err)
	return resp, err
}

// template returns req's route when Options.Route names one that may be
// reported, else "".
func (t *Transport) template(req *http.Request) string {
	if t.route == nil {
		return ""
	}
	if r := t.route(req); metricsutil.ValidRoute(r) {
		return r
	}
	return ""
}

// startAttributes describes the request: method, server, route template
// and, on a client span, url.full redacted as the conventions ask
// ([redactedURL]).
func (t *Transport) startAttributes(req *http.Request, method int, template string) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, 0, 5)
	kvs = append(kvs, semconv.HTTPRequestMethodKey.String(methods[method]))
	if req.URL != nil {
		if host := req.URL.Hostname(); host != "" {
			kvs = append(kvs, semconv.ServerAddress(host))
		}
		if port := serverPort(req.URL.Scheme, req.URL.Port()); port > 0 {
			kvs = append(kvs, semconv.ServerPort(port))
		}
		if t.kind == trace.SpanKindClient {
			kvs = append(kvs, semconv.URLFull(redactedURL(req.URL)))
		}
	}
	if template != "" {
		kvs = append(kvs, semconv.URLTemplate(template))
	}
	return kvs
}

// redactedURL is u as the HTTP semantic conventions want it in url.full:
// userinfo replaced by REDACTED:REDACTED, and, beyond what they require,
// every query value replaced by REDACTED (names kept, as sent and in
// their order), since a query string may carry a token; no fragment.
func redactedURL(u *url.URL) string {
	r := *u
	if r.User != nil {
		r.User = url.UserPassword("REDACTED", "REDACTED")
	}
	r.RawQuery = redactedQuery(r.RawQuery)
	r.Fragment, r.RawFragment = "", ""
	return r.String()
}

// redactedQuery replaces the value of every parameter of a raw query
// with REDACTED. A parameter without "=" is a value with no name (a bare
// token, "?abc123"), so it is replaced whole. The query is not parsed: a
// parameter that would not parse (a ";" in it, a bad escape) is redacted
// like any other rather than dropped.
func redactedQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var b strings.Builder
	for i, param := range strings.Split(raw, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		name, _, named := strings.Cut(param, "=")
		if named {
			b.WriteString(name)
			b.WriteByte('=')
		}
		b.WriteString("REDACTED")
	}
	return b.String()
}

// serverPort returns the explicit port, or the scheme's default.
func serverPort(scheme, port string) int {
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil {
			return 0
		}
		return n
	}
	switch scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}

// end records the operation's result on its span and ends it.
func (t *Transport) end(op *operation, resp *http.Response, err error) {
	span, o := op.span, op.outcome
	// The outcome class by the metrics' one rule, from what the caller
	// got (a nil, nil answer is a broken RoundTripper's: an error).
	got := httpretry.Outcome{Err: err, Unknown: errors.Is(err, httpretry.ErrOutcomeUnknown)}
	if resp != nil && err == nil {
		got.Status = resp.StatusCode
	}
	outcome := labels.Outcome(got)
	kvs := make([]attribute.KeyValue, 0, 6)
	kvs = append(kvs, attribute.String(keyOutcome, labels.Outcomes[outcome]))
	if o.Reason != "" { // the wrapped RoundTripper is a retrying Transport
		kvs = append(kvs,
			keyAttempts.Int(o.Attempts),
			attribute.String(keyStopReason, labels.Reasons[labels.Reason(o.Reason)]),
			keyWaited.Float64(o.Waited.Seconds()))
	}
	if resp != nil {
		kvs = append(kvs, semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	switch outcome {
	case labels.OutcomeErrorResponse:
		// The status code says it all; the conventions want no
		// description then.
		kvs = append(kvs, semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	case labels.OutcomeError, labels.OutcomeUnknown:
		class := httpretry.ErrorClass(err)
		if class == "" {
			class = "_OTHER" // the conventions' fallback value
		}
		kvs = append(kvs, semconv.ErrorTypeKey.String(class))
		// A class and a reason from fixed tables: an error's own text
		// may quote the URL.
		desc := class
		if o.Reason != "" {
			desc = string(o.Reason) + ": " + class
		}
		span.SetStatus(codes.Error, desc)
	}
	span.SetAttributes(kvs...)
	span.End()
}

// OnAttempt adds a [RetryEvent] to the operation span when a retry
// follows the attempt, with the attempt's number, the wait in seconds
// (httpretry.wait) and why: http.response.status_code or error.type. It
// has the signature of [httpretry.Transport.OnAttempt] and does nothing
// for a request that did not come through t.
func (t *Transport) OnAttempt(req *http.Request, a httpretry.Attempt) {
	op := operationFrom(req.Context())
	if op == nil || a.Wait <= 0 || !op.span.IsRecording() {
		return
	}
	why := semconv.ErrorTypeKey.String(httpretry.ErrorClass(a.Err))
	if a.Err == nil {
		why = semconv.HTTPResponseStatusCode(a.Status)
	}
	op.span.AddEvent(RetryEvent, trace.WithAttributes(
		keyAttempt.Int(a.Number),
		keyWait.Float64(a.Wait.Seconds()),
		why,
	))
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, when it has that method (as [httpretry.Transport] does).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
