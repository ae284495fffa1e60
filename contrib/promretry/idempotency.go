package promretry

import (
	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/metricsutil/labels"
)

// The kinds of event [Collector.IdempotencyEvent] counts: what a server's
// idempotency-key middleware did with one request. They are the kinds of
// the idempotency package's events, defined from them, so that its hook
// can pass string(event.Kind) unchanged.
const (
	// EventExecuted: the request reserved its key and the handler ran.
	EventExecuted = string(idempotency.KindExecuted)
	// EventReplayed: the key's recorded response was sent again without
	// running the handler.
	EventReplayed = string(idempotency.KindReplayed)
	// EventConflict: a request with the same key was still in progress.
	EventConflict = string(idempotency.KindConflict)
	// EventMismatch: the key was reused with a different request.
	EventMismatch = string(idempotency.KindMismatch)
	// EventMissingKey: a request that needs a key came without one.
	EventMissingKey = string(idempotency.KindMissingKey)
	// EventInvalidKey: the key was empty, too long or malformed.
	EventInvalidKey = string(idempotency.KindInvalidKey)
	// EventRequestTooLarge: the request body was too large to fingerprint.
	EventRequestTooLarge = string(idempotency.KindRequestTooLarge)
	// EventRequestUnreadable: the request body failed to read (the client
	// stopped sending, or the connection broke).
	EventRequestUnreadable = string(idempotency.KindRequestUnreadable)
	// EventTakeover: a request took over a key whose previous owner's
	// lock had expired.
	EventTakeover = string(idempotency.KindTakeover)
	// EventNotRecorded: the handler's response was not recorded, so a
	// retry runs the handler again.
	EventNotRecorded = string(idempotency.KindNotRecorded)
	// EventFenced: the handler finished after another request took its
	// key over; its response was not recorded.
	EventFenced = string(idempotency.KindFenced)
	// EventStoreError: the middleware's store failed.
	EventStoreError = string(idempotency.KindStoreError)
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
