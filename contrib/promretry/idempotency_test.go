package promretry

import "testing"

func TestIdempotencyEvent(t *testing.T) {
	c, reg := newCollector(t, Options{})
	for _, kind := range []string{
		EventExecution, EventExecution, EventReplay, EventConflict, EventMismatch,
		EventMissingKey, EventTakeover, "Replay", "", "replay\x00", EventOther,
	} {
		c.IdempotencyEvent(kind)
	}
	checkFamily(t, samples(scrape(t, reg)), "httpretry_idempotency_events_total", map[string]float64{
		`httpretry_idempotency_events_total{kind="execution"}`:   2,
		`httpretry_idempotency_events_total{kind="replay"}`:      1,
		`httpretry_idempotency_events_total{kind="conflict"}`:    1,
		`httpretry_idempotency_events_total{kind="mismatch"}`:    1,
		`httpretry_idempotency_events_total{kind="missing_key"}`: 1,
		`httpretry_idempotency_events_total{kind="takeover"}`:    1,
		`httpretry_idempotency_events_total{kind="other"}`:       4,
	})
}
