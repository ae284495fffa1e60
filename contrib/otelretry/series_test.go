package otelretry

import (
	"sync"
	"testing"

	"github.com/httpretry/httpretry/internal/metricsutil/labels"
	"go.opentelemetry.io/otel/attribute"
)

// TestSeriesBuiltOnce: goroutines racing for the same label combination
// all get the one option that won, so the SDK sees a single attribute set.
func TestSeriesBuiltOnce(t *testing.T) {
	rs := newRouteSeries(attribute.String(keyServer, "api.test"))
	var wg sync.WaitGroup
	methodsSeen := make([]*methodSeries, 8)
	opts := make([]addOpts, 8)
	for g := range methodsSeen {
		wg.Go(func() {
			methodsSeen[g] = rs.method(2)
			opts[g] = methodsSeen[g].operation(labels.OutcomeUnknown, labels.Reason("not_idempotent"))
		})
	}
	wg.Wait()
	for g := range methodsSeen {
		if methodsSeen[g] != methodsSeen[0] || &opts[g][0] != &opts[0][0] {
			t.Fatalf("goroutine %d got a different series", g)
		}
	}
	ms := methodsSeen[0]
	if ms.method != "POST" || ms.route.Value.AsString() != "api.test" {
		t.Errorf("series of (%q, %q); want (POST, api.test)", ms.method, ms.route)
	}
	if len(ms.attempts[0][3]) != 1 || len(rs.attemptDuration[2][5]) != 1 || len(rs.operationDuration[1][2]) != 1 || len(phaseOpts[4]) != 1 {
		t.Error("option slices must hold exactly one option")
	}
}
