package promretry

import (
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
)

// IdempotencyEvent counts one event of a server's idempotency-key
// middleware in httpretry_idempotency_events_total{kind}. kind is the
// string of an [github.com/httpretry/httpretry/idempotency.Kind] (string(idempotency.KindReplayed), the
// one list of them being [github.com/httpretry/httpretry/idempotency.Kinds]); any other string counts as
// "other", so that a caller's typo or a newer middleware cannot add series. It allocates
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
