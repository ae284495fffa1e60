package otelretry

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/httpretry/httpretry"
	"go.opentelemetry.io/otel/trace/noop"
)

// maxAddedAllocs is what metrics may add to a successful operation, over
// the same Transport without them, traces off.
const maxAddedAllocs = 4

// TestCostPerOperation measures, with testing.AllocsPerRun, the
// allocations of a successful operation through a Transport with and
// without this package's metrics (through the SDK, traces off), over an
// in-memory *http.Transport and over another in-memory RoundTripper, and
// holds the difference to maxAddedAllocs, for the hooks alone and for
// Instrument with a no-op TracerProvider. `make metrics-cost` prints its log.
func TestCostPerOperation(t *testing.T) {
	if raceEnabled {
		t.Skip("the root pools its connection traces; under -race pools drop items at random")
	}
	bases := []struct {
		name string
		base func() http.RoundTripper
		url  string
	}{
		{"*http.Transport", func() http.RoundTripper { return newMemTransport() }, "mem://api.test/books/b1"},
		{"in-memory RoundTripper", func() http.RoundTripper { return newStaticBase() }, "http://api.test/books/b1"},
	}
	for _, b := range bases {
		bare := allocsPerOperation(t, &httpretry.Transport{Base: b.base()}, b.url)

		m, err := NewMetrics(Options{MeterProvider: sdkMeterProvider(t)})
		if err != nil {
			t.Fatal(err)
		}
		hooked := &httpretry.Transport{Base: b.base(),
			OnAttemptStart: m.OnAttemptStart, OnAttempt: m.OnAttempt, OnDone: m.OnDone}
		hooks := allocsPerOperation(t, hooked, b.url)

		rt, err := Instrument(&httpretry.Transport{Base: b.base()},
			Options{MeterProvider: sdkMeterProvider(t), TracerProvider: noop.NewTracerProvider()})
		if err != nil {
			t.Fatal(err)
		}
		instrumented := allocsPerOperation(t, rt, b.url)

		t.Logf("otelretry over %-22s  without: %v allocs/op  metrics: %v (added %v)  Instrument, traces off: %v (added %v)  target ≤ %d",
			b.name, bare, hooks, hooks-bare, instrumented, instrumented-bare, maxAddedAllocs)
		if hooks-bare > maxAddedAllocs || instrumented-bare > maxAddedAllocs {
			t.Errorf("over %s: metrics add %v, Instrument with traces off %v allocations per operation; want at most %d",
				b.name, hooks-bare, instrumented-bare, maxAddedAllocs)
		}
	}
}

// allocsPerOperation returns the allocations of one successful GET
// through rt, after a first one that creates the series.
func allocsPerOperation(t *testing.T, rt http.RoundTripper, url string) float64 {
	t.Helper()
	req := httptest.NewRequest("GET", url, nil)
	return testing.AllocsPerRun(500, func() {
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
		}
		resp.Body.Close()
	})
}

// newMemTransport returns an *http.Transport answering "mem://" URLs in
// memory: a Base the Transport knows, without a network.
func newMemTransport() *http.Transport {
	t := &http.Transport{}
	t.RegisterProtocol("mem", newStaticBase())
	return t
}
