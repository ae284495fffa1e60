package otelretry

import (
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
)

// TestAttemptsPlacement: Attempts numbers attempts from the header a
// propagating Transport sends when no operation span is in the context,
// and never marks the operation span when placed outside otelhttp.
func TestAttemptsPlacement(t *testing.T) {
	t.Run("from the attempt header", func(t *testing.T) {
		tp, rec := newRecorder(t)
		script := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
		tr := &httpretry.Transport{Base: otelhttp.NewTransport(Attempts(script), otelhttp.WithTracerProvider(tp)),
			Jitter: noJitter, Propagate: true}
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		closeResp(result{resp: resp})
		spans := byKind(rec, trace.SpanKindClient)
		if len(spans) != 2 {
			t.Fatalf("got %d client spans; want 2", len(spans))
		}
		if got := attrMap(spans[0])["http.request.resend_count"]; got != "" {
			t.Errorf("first attempt resend_count = %q; want none", got)
		}
		if got := attrMap(spans[1])["http.request.resend_count"]; got != "1" {
			t.Errorf("second attempt resend_count = %q; want 1", got)
		}
	})
	t.Run("outside otelhttp", func(t *testing.T) {
		tp, rec := newRecorder(t)
		script := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
		tr := &httpretry.Transport{Base: Attempts(script), Jitter: noJitter}
		resp, err := Wrap(tr, Options{TracerProvider: tp}).RoundTrip(newRequest(t, "GET", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		closeResp(result{resp: resp})
		spans := rec.Ended()
		if len(spans) != 1 {
			t.Fatalf("got %d spans; want 1", len(spans))
		}
		if got, ok := attrMap(spans[0])["http.request.resend_count"]; ok {
			t.Errorf("operation span has http.request.resend_count=%s; want none", got)
		}
		if got := attrMap(spans[0])["httpretry.attempts"]; got != "2" {
			t.Errorf("httpretry.attempts = %s; want 2", got)
		}
	})
}
