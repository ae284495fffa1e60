package otelretry

import (
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// TestIdempotencyEvent: a kind of the idempotency package counts under its
// own name; any other string, "other" itself included, counts as other.
func TestIdempotencyEvent(t *testing.T) {
	m, metrics := newMetrics(t, Options{})
	replayed, executed, takeover := string(idempotency.KindReplayed), string(idempotency.KindExecuted), string(idempotency.KindTakeover)
	for _, kind := range []string{replayed, replayed, executed, "replay", "made_up", "other", takeover} {
		m.IdempotencyEvent(kind)
	}
	diffLines(t, metrics(), []string{
		"httpretry.server.idempotency.events{httpretry.idempotency.event=executed} 1",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=other} 3",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=replayed} 2",
		"httpretry.server.idempotency.events{httpretry.idempotency.event=takeover} 1",
	})
	if allocs := testing.AllocsPerRun(100, func() { m.IdempotencyEvent(replayed) }); allocs > 0 {
		t.Errorf("%v allocs per event; want 0", allocs)
	}
}
