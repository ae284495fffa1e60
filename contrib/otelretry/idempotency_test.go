package otelretry

import "testing"

func TestIdempotencyEvent(t *testing.T) {
	m, metrics := newMetrics(t, Options{})
	for _, kind := range []string{EventReplay, EventReplay, EventExecution, "made_up", EventOther, EventTakeover} {
		m.IdempotencyEvent(kind)
	}
	diffLines(t, metrics(), []string{
		"httpretry.server.idempotency.events{httpretry.idempotency.event=execution} 1",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=other} 2",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=replay} 2",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=takeover} 1",
	})
	if allocs := testing.AllocsPerRun(100, func() { m.IdempotencyEvent(EventReplay) }); allocs > 0 {
		t.Errorf("%v allocs per event; want 0", allocs)
	}
}
