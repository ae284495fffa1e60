package promretry

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/prometheus/client_golang/prometheus"
)

// maxAddedAllocs is what a Collector may add to a successful operation,
// over the same Transport without it.
const maxAddedAllocs = 2

// TestCostPerOperation measures, with testing.AllocsPerRun, the
// allocations of a successful operation through a Transport with and
// without a Collector, over an in-memory *http.Transport and over another
// in-memory RoundTripper, and holds the difference to maxAddedAllocs.
// `make metrics-cost` prints its log.
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
		tr := &httpretry.Transport{Base: b.base()}
		c, err := New(prometheus.NewRegistry(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Instrument(tr)
		with := allocsPerOperation(t, tr, b.url)
		t.Logf("promretry over %-22s  without: %v allocs/op  with: %v allocs/op  added: %v (target ≤ %d)",
			b.name, bare, with, with-bare, maxAddedAllocs)
		if with-bare > maxAddedAllocs {
			t.Errorf("over %s: a Collector adds %v allocations per operation; want at most %d", b.name, with-bare, maxAddedAllocs)
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
