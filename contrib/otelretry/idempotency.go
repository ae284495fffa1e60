package otelretry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
)

// The kinds of event [Metrics.IdempotencyEvent] counts: what a server's
// idempotency-key middleware did with one request.
const (
	// EventExecution: the request's key was new and the handler ran.
	EventExecution = "execution"
	// EventReplay: the key was known and the stored response was sent
	// again without running the handler.
	EventReplay = "replay"
	// EventConflict: a request with the same key was still in progress.
	EventConflict = "conflict"
	// EventMismatch: the key was reused with a different request.
	EventMismatch = "mismatch"
	// EventMissingKey: a request that needs a key came without one.
	EventMissingKey = "missing_key"
	// EventTakeover: an execution whose owner stopped responding was taken
	// over by another.
	EventTakeover = "takeover"
	// EventOther stands for any kind not listed above.
	EventOther = "other"
)

var eventKinds = [...]string{
	EventExecution, EventReplay, EventConflict, EventMismatch,
	EventMissingKey, EventTakeover, EventOther,
}

const numEventKinds = len(eventKinds)

func eventIndex(kind string) int {
	for i, k := range eventKinds[:numEventKinds-1] {
		if kind == k {
			return i
		}
	}
	return numEventKinds - 1
}

// eventOpts holds the options of the idempotency counter, one per kind.
var eventOpts = func() (o [numEventKinds]addOpts) {
	for i, k := range eventKinds {
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
	m.idempotencyEvents.Add(context.Background(), 1, eventOpts[eventIndex(kind)]...)
}
