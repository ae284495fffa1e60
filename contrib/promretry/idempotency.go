package promretry

// The kinds of event [Collector.IdempotencyEvent] counts: what a server's
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

var eventNames = [...]string{
	EventExecution, EventReplay, EventConflict, EventMismatch,
	EventMissingKey, EventTakeover, EventOther,
}

const numEventKinds = len(eventNames)

func eventIndex(kind string) int {
	for i, name := range eventNames[:numEventKinds-1] {
		if kind == name {
			return i
		}
	}
	return numEventKinds - 1
}

// IdempotencyEvent counts one event of a server's idempotency-key
// middleware in httpretry_idempotency_events_total{kind}. kind is one of
// the Event constants; any other string counts as [EventOther], so that a
// caller's typo or a newer middleware cannot add series. It allocates
// nothing once the kind's series exists.
//
// It takes a plain string so that a middleware can report to it without
// importing this package:
//
//	mw.OnEvent = func(kind string) { collector.IdempotencyEvent(kind) }
func (c *Collector) IdempotencyEvent(kind string) {
	i := eventIndex(kind)
	ctr, ok := c.idempotencyEvents[i].get()
	if !ok {
		ctr = c.idempotencyEvents[i].set(c.idempotency.WithLabelValues(eventNames[i]))
	}
	ctr.Inc()
}
