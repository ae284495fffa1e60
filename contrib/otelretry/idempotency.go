package otelretry

import (
	"context"

	"github.com/httpretry/httpretry/internal/metricsutil/labels"
	"go.opentelemetry.io/otel/attribute"
)

// eventOpts holds the options of the idempotency counter, one per kind.
var eventOpts = func() []addOpts {
	o := make([]addOpts, labels.NumEvents)
	for i, k := range labels.Events {
		o[i] = newAddOpts(attribute.String(keyIdempotencyEvent, k))
	}
	return o
}()

// IdempotencyEvent counts one event of a server's idempotency-key
// middleware in httpretry.server.idempotency.events, attribute
// httpretry.idempotency.event. kind is the string of an
// [github.com/httpretry/httpretry/idempotency.Kind] (string(idempotency.KindReplayed), the one list of
// them being [github.com/httpretry/httpretry/idempotency.Kinds]); any other string counts as "other", so
// that a typo or a newer
// middleware cannot add series. It allocates nothing.
//
// It takes a plain string so that a middleware can report to it without
// importing this package:
//
//	OnEvent: func(e idempotency.Event) { metrics.IdempotencyEvent(string(e.Kind)) },
func (m *Metrics) IdempotencyEvent(kind string) {
	m.idempotencyEvents.Add(context.Background(), 1, eventOpts[labels.Event(kind)]...)
}
