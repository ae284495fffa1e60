package promretry

import "github.com/httpretry/httpretry/internal/labels"

// The kinds of event [Collector.IdempotencyEvent] counts: what a server's
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

// IdempotencyEvent counts one event of a server's idempotency-key
// middleware in httpretry_idempotency_events_total{kind}. kind is one of
// the Event constants; any other string counts as [EventOther], so that a
// caller's typo or a newer middleware cannot add series. It allocates
// nothing once the kind's series exists.
//
// It takes a plain string so that a middleware can report to it without
// either package importing the other:
//
//	OnEvent: func(e idempotency.Event) { metrics.IdempotencyEvent(string(e.Kind)) },
func (c *Collector) IdempotencyEvent(kind string) {
	i := labels.Event(kind)
	ctr, ok := c.idempotencyEvents[i].get()
	if !ok {
		ctr = c.idempotencyEvents[i].set(c.idempotency.WithLabelValues(labels.Events[i]))
	}
	ctr.Inc()
}
