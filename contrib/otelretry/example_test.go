package otelretry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/otelretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A server that fails the first request with 503; a client whose
// operation span holds one otelhttp span per attempt, the retry numbered.
func ExampleInstrument() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	// In a program these are the application's providers.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	pool := &http.Transport{}
	defer pool.CloseIdleConnections()
	tr := &httpretry.Transport{
		// Attempts inside otelhttp: each attempt's span gets its resend count.
		Base:      otelhttp.NewTransport(otelretry.Attempts(pool), otelhttp.WithTracerProvider(tp)),
		BaseDelay: time.Millisecond,
		Jitter:    func(window time.Duration) time.Duration { return window },
	}
	rt, err := otelretry.Instrument(tr, otelretry.Options{
		TracerProvider: tp,
		MeterProvider:  mp,
		Route:          func(*http.Request) string { return "/books/{id}" },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: rt}
	resp, err := client.Get(srv.URL + "/books/1")
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	ended := spans.Ended()
	slices.SortFunc(ended, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for _, s := range ended {
		indent := ""
		if s.Parent().SpanID() == ended[0].SpanContext().SpanID() {
			indent = "  "
		}
		fmt.Printf("%s%s (%s)", indent, s.Name(), s.SpanKind())
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "httpretry.attempts", "httpretry.stop_reason", "http.request.resend_count", "http.response.status_code":
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
		}
		for _, e := range s.Events() {
			fmt.Printf(" [event %s]", e.Name)
		}
		fmt.Println()
	}

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "httpretry.client.attempts" {
			for _, p := range sum.DataPoints {
				kind, _ := p.Attributes.Value("httpretry.attempt.kind")
				route, _ := p.Attributes.Value("url.template")
				fmt.Printf("%s{kind=%s,route=%s} %d\n", m.Name, kind.AsString(), route.AsString(), p.Value)
			}
		}
	}
	// Unordered output:
	// GET /books/{id} (internal) httpretry.attempts=2 httpretry.stop_reason=final http.response.status_code=200 [event httpretry.retry]
	//   HTTP GET (client) http.response.status_code=503
	//   HTTP GET (client) http.request.resend_count=1 http.response.status_code=200
	// httpretry.client.attempts{kind=initial,route=/books/{id}} 1
	// httpretry.client.attempts{kind=retry,route=/books/{id}} 1
}
