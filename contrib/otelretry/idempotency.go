package otelretry

import (
	"context"

	"github.com/httpretry/httpretry/internal/labels"
	"go.opentelemetry.io/otel/attribute"
)

// The kinds of event [Metrics.IdempotencyEvent] counts: what a server's
// idempotency-key middleware did with one request. They are the kinds of
// the idempotency package's events, so that its hook can pass
// string(event.Kind) unchanged.
const (
	// EventExecuted: the request reserved its key and the handler ran.
	EventExecuted = "executed"
	// EventReplayed: the key's recorded response was sent again without
	// running the handler.
	EventReplayed = "replayed"
	// EventConflict: a request with the same key was still in progress.
	EventConflict = "conflict"
	// EventMismatch: the key was reused with a different request.
	EventMismatch = "mismatch"
	// EventMissingKey: a request that needs a key came without one.
	EventMissingKey = "missing_key"
	// EventInvalidKey: the key was empty, too long or malformed.
	EventInvalidKey = "invalid_key"
	// EventRequestTooLarge: the request body was too large to fingerprint.
	EventRequestTooLarge = "request_too_large"
	// EventRequestUnreadable: the request body failed to read (the client
	// stopped sending, or the connection broke).
	EventRequestUnreadable = "request_unreadable"
	// EventTakeover: a request took over a key whose previous owner's
	// lock had expired.
	EventTakeover = "takeover"
	// EventNotRecorded: the handler's response was not recorded, so a
	// retry runs the handler again.
	EventNotRecorded = "not_recorded"
	// EventFenced: the handler finished after another request took its
	// key over; its response was not recorded.
	EventFenced = "fenced"
	// EventStoreError: the middleware's store failed.
	EventStoreError = "store_error"
	// EventOther stands for any kind not listed above.
	EventOther = "other"
)

// eventOpts holds the options of the idempotency counter, one per kind.
var eventOpts = func() (o [labels.NumEvents]addOpts) {
	for i, k := range labels.Events {
		o[i] = newAddOpts(attribute.String(keyIdempotencyEvent, k))
	}
	return o
}()

// IdempotencyEvent counts one event of a server's idempotency-key
// middleware in httpretry.server.idempotency.events, attribute
// httpretry.idempotency.event. kind is one of the Event constants; any
// other string counts as [EventOther], so that a typo or a newer
// middleware cannot add series. It allocates nothing.
//
// It takes a plain string so that a middleware can report to it without
// importing this package:
//
//	mw.OnEvent = func(kind string) { metrics.IdempotencyEvent(kind) }
func (m *Metrics) IdempotencyEvent(kind string) {
	m.idempotencyEvents.Add(context.Background(), 1, eventOpts[labels.Event(kind)]...)
}
