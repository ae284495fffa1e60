package otelretry

import (
	"strings"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"go.opentelemetry.io/otel/trace"
)

// TestMetricServerAddressIsTheSpans: without Options.Route, the metrics'
// server.address is the host alone, as on the operation span and as the
// HTTP semantic conventions define it (the port is server.port), so
// that metrics and spans of one server join on it.
func TestMetricServerAddressIsTheSpans(t *testing.T) {
	mp, reader := newReader(t)
	tp, rec := newRecorder(t)
	rt, err := Instrument(&httpretry.Transport{Base: httptestutil.NewTransport(nil, httptestutil.Step{Status: 200})},
		Options{MeterProvider: mp, TracerProvider: tp, SpanKind: trace.SpanKindClient})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(newRequest(t, "GET", "http://api.test:8443/books/1", nil))
	closeResp(result{resp: resp, err: err})
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("got %d spans; want 1", len(spans))
	}
	var spanAddr string
	for _, kv := range spans[0].Attributes() {
		if kv.Key == "server.address" {
			spanAddr = kv.Value.AsString()
		}
	}
	if spanAddr != "api.test" {
		t.Fatalf("span server.address = %q; want api.test", spanAddr)
	}
	lines := filter(collect(t, reader), "httpretry.client.operations{")
	if len(lines) == 0 {
		t.Fatal("no operations recorded")
	}
	for _, line := range lines {
		if !strings.Contains(line, "server.address="+spanAddr+"}") && !strings.Contains(line, "server.address="+spanAddr+",") {
			t.Errorf("metric %s: server.address is not the span's %q", line, spanAddr)
		}
	}
}
