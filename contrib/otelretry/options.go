package otelretry

import (
	"net/http"

	"github.com/httpretry/httpretry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer this
// package creates.
const ScopeName = "github.com/httpretry/httpretry/contrib/otelretry"

// Options configures [NewMetrics], [Wrap] and [Instrument]. The zero value
// reports to the global OpenTelemetry providers, with the request's host
// as the route. [Instrument] fills MaxAttempts and Budget from the
// Transport it instruments when they are unset.
type Options struct {
	// MeterProvider creates the instruments. If nil, the global
	// provider, otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// TracerProvider creates the operation spans. If nil, the global
	// provider, otel.GetTracerProvider(). A no-op provider
	// (noop.NewTracerProvider()) turns traces off: [Wrap]'s Transport
	// then opens no span and costs nothing per operation.
	TracerProvider trace.TracerProvider

	// Route names a request's route for the metrics' url.template
	// attribute and the operation span's url.template and name: a
	// template such as
	// "/books/{id}", never a raw path, which would give every book its
	// own series and may carry identifiers. At most MaxRoutes distinct
	// values are reported; later ones, and values that are empty, longer
	// than 128 bytes or not valid UTF-8, are reported as "other". If nil,
	// the route is the request's host without its port, reported as the
	// metrics' server.address attribute.
	Route func(req *http.Request) string

	// MaxRoutes caps the distinct route values. 0 (or
	// negative) means 100.
	MaxRoutes int

	// MaxAttempts sets the buckets of httpretry.client.operation.attempts
	// to 1, 2, …, MaxAttempts: set it to the Transport's MaxAttempts.
	// 0 (or negative) means httpretry.DefaultMaxAttempts.
	MaxAttempts int

	// Budget, if set, is observed by the httpretry.client.budget.tokens
	// gauge and, for a budget shared through a store, the
	// httpretry.client.budget.shared gauge. It must have a Tokens method:
	// Tokens() float64, as [*httpretry.TokenBucket] has, or
	// Tokens(context.Context) (float64, error), as contrib/redisretry's
	// Budget has; NewMetrics fails otherwise. If nil, the gauges report
	// nothing ([Instrument] fills it from the Transport).
	Budget any

	// Attributes name this client among several in one process or one
	// backend, e.g. attribute.String("client", "payments"): the
	// equivalent of promretry's ConstLabels. They are the attributes of
	// the meter's and the tracer's instrumentation scope, so they cost
	// nothing per measurement; an exporter shows them with every series
	// (Prometheus as otel_scope_client="payments"). Each Metrics of a
	// MeterProvider then gets its own meter. If nil, none.
	Attributes []attribute.KeyValue

	// SpanKind is the kind of the operation span. 0 means
	// trace.SpanKindInternal, right when each attempt has its own client
	// span (Base wrapped by otelhttp): the HTTP semantic conventions want
	// client spans for the physical requests and no second client span
	// around them. Set trace.SpanKindClient when the attempts have no
	// spans of their own.
	SpanKind trace.SpanKind
}

func (o *Options) meterProvider() metric.MeterProvider {
	if o.MeterProvider != nil {
		return o.MeterProvider
	}
	return otel.GetMeterProvider()
}

func (o *Options) tracerProvider() trace.TracerProvider {
	if o.TracerProvider != nil {
		return o.TracerProvider
	}
	return otel.GetTracerProvider()
}

func (o *Options) maxRoutes() int {
	if o.MaxRoutes <= 0 {
		return DefaultMaxRoutes
	}
	return o.MaxRoutes
}

func (o *Options) maxAttempts() int {
	if o.MaxAttempts <= 0 {
		return httpretry.DefaultMaxAttempts
	}
	return o.MaxAttempts
}

func (o *Options) spanKind() trace.SpanKind {
	if o.SpanKind == trace.SpanKindUnspecified {
		return trace.SpanKindInternal
	}
	return o.SpanKind
}
