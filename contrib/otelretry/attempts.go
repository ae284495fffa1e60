package otelretry

import (
	"net/http"
	"strconv"

	"github.com/httpretry/httpretry"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Attempts returns a RoundTripper that numbers the attempts of each
// operation and sets http.request.resend_count (the attempt's number
// minus one, on retries only, as the HTTP semantic conventions ask) on
// the attempt's client span, then sends the attempt through base. A nil
// base means [http.DefaultTransport].
//
// It must run inside the span it annotates: place it as the RoundTripper
// that otelhttp wraps, and otelhttp as the retrying Transport's Base:
//
//	rt := &httpretry.Transport{Base: otelhttp.NewTransport(otelretry.Attempts(http.DefaultTransport))}
//	client.Transport = otelretry.Wrap(rt, otelretry.Options{})
//
// The attempt number comes from the operation state that [Transport] (from
// [Wrap] or [Instrument]) put in the request's context; without it, from
// the [httpretry.AttemptHeader] that a retrying Transport with Propagate
// set sends. A request with neither, or whose current span is the
// operation span itself (Attempts outside otelhttp), is sent unchanged.
func Attempts(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &attempts{base: base}
}

type attempts struct{ base http.RoundTripper }

func (a *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	span := trace.SpanFromContext(ctx)
	n := 0
	if op := operationFrom(ctx); op != nil {
		n = int(op.attempts.Add(1))
		if span.SpanContext().SpanID() == op.span.SpanContext().SpanID() {
			n = 0 // no attempt span: never mark the operation span
		}
	} else if v := req.Header.Get(httpretry.AttemptHeader); v != "" {
		n, _ = strconv.Atoi(v)
	}
	if n > 1 && span.IsRecording() {
		span.SetAttributes(semconv.HTTPRequestResendCount(n - 1))
	}
	return a.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of base, when it has
// that method.
func (a *attempts) CloseIdleConnections() {
	if c, ok := a.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
