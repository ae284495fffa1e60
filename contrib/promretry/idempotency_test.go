package promretry

import (
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// TestIdempotencyEvent: every kind of the idempotency package counts under
// its own name; any other string, "other" itself included, counts as other.
func TestIdempotencyEvent(t *testing.T) {
	c, reg := newCollector(t, Options{})
	kinds := []string{string(idempotency.KindExecuted)}
	for _, k := range idempotency.Kinds() {
		kinds = append(kinds, string(k))
	}
	for _, kind := range append(kinds, "Replayed", "", "replayed\x00", "execution", "other") {
		c.IdempotencyEvent(kind)
	}
	checkFamily(t, samples(scrape(t, reg)), "httpretry_idempotency_events_total", map[string]float64{
		`httpretry_idempotency_events_total{kind="executed"}`:           2,
		`httpretry_idempotency_events_total{kind="replayed"}`:           1,
		`httpretry_idempotency_events_total{kind="conflict"}`:           1,
		`httpretry_idempotency_events_total{kind="mismatch"}`:           1,
		`httpretry_idempotency_events_total{kind="missing_key"}`:        1,
		`httpretry_idempotency_events_total{kind="invalid_key"}`:        1,
		`httpretry_idempotency_events_total{kind="request_too_large"}`:  1,
		`httpretry_idempotency_events_total{kind="request_unreadable"}`: 1,
		`httpretry_idempotency_events_total{kind="takeover"}`:           1,
		`httpretry_idempotency_events_total{kind="not_recorded"}`:       1,
		`httpretry_idempotency_events_total{kind="fenced"}`:             1,
		`httpretry_idempotency_events_total{kind="store_error"}`:        1,
		`httpretry_idempotency_events_total{kind="other"}`:              5,
	})
}
