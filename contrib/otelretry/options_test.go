package otelretry

import (
	"testing"

	"github.com/httpretry/httpretry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

func TestOptionsDefaults(t *testing.T) {
	var o Options
	if o.meterProvider() != otel.GetMeterProvider() || o.tracerProvider() != otel.GetTracerProvider() {
		t.Error("zero Options do not use the global providers")
	}
	if got := o.maxRoutes(); got != DefaultMaxRoutes {
		t.Errorf("maxRoutes = %d; want %d", got, DefaultMaxRoutes)
	}
	if got := o.maxAttempts(); got != httpretry.DefaultMaxAttempts {
		t.Errorf("maxAttempts = %d; want %d", got, httpretry.DefaultMaxAttempts)
	}
	if got := o.spanKind(); got != trace.SpanKindInternal {
		t.Errorf("spanKind = %v; want internal", got)
	}
	o = Options{MaxRoutes: 7, MaxAttempts: 5, SpanKind: trace.SpanKindClient}
	if o.maxRoutes() != 7 || o.maxAttempts() != 5 || o.spanKind() != trace.SpanKindClient {
		t.Errorf("set options not used: %+v", o)
	}
}
