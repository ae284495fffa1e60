package otelretry

import "testing"

func TestIdempotencyEvent(t *testing.T) {
	m, metrics := newMetrics(t, Options{})
	for _, kind := range []string{EventReplayed, EventReplayed, EventExecuted, "replay", "made_up", EventOther, EventTakeover} {
		m.IdempotencyEvent(kind)
	}
	diffLines(t, metrics(), []string{
		"httpretry.server.idempotency.events{httpretry.idempotency.event=executed} 1",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=other} 3",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=replayed} 2",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=takeover} 1",
	})
	if allocs := testing.AllocsPerRun(100, func() { m.IdempotencyEvent(EventReplayed) }); allocs > 0 {
		t.Errorf("%v allocs per event; want 0", allocs)
	}
}
