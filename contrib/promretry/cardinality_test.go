package promretry

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
)

// TestCardinality sends 10,000 operations to 1,000 distinct paths (with
// query strings) and three methods, and checks that the series created
// are exactly those the label design allows: the route label alone
// depends on the requests, and it is capped.
func TestCardinality(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		routes int // distinct route values expected
	}{
		{"default route: the host", Options{}, 1},
		// A careless route function that returns the raw path: the cap
		// keeps 100 of them, the rest are "other".
		{"raw paths, capped", Options{Route: func(r *http.Request) string { return r.URL.Path }}, DefaultMaxRoutes + 1},
	}
	methods := []string{"GET", "POST", "BREW"}
	// Operations past the cap: paths 100 to 999, ten operations each.
	overflows := map[string]int{"raw paths, capped": 9_000}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, reg := newCollector(t, tt.opts)
			tr := &httpretry.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
			})}
			c.Instrument(tr)
			for i := range 10_000 {
				url := fmt.Sprintf("http://api.test/books/%d?token=secret%d", i%1000, i)
				resp, err := tr.RoundTrip(mustRequest(t, t.Context(), methods[i%3], url))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			all := samples(scrape(t, reg))
			routes := make(map[string]bool)
			for k := range all {
				if strings.Contains(k, "secret") {
					t.Fatalf("series %s carries the query string", k)
				}
				if _, rest, ok := strings.Cut(k, `route="`); ok {
					routes[rest[:strings.IndexByte(rest, '"')]] = true
				}
			}
			if len(routes) != tt.routes {
				t.Errorf("%d route values; want %d", len(routes), tt.routes)
			}
			// Every route saw all three methods (i%1000 and i%3 cover
			// each pair), each operation one successful initial attempt.
			counters := 3 * tt.routes
			for _, name := range []string{"httpretry_operations_total", "httpretry_attempts_total",
				"httpretry_attempts_started_total", "httpretry_attempt_successes_total"} {
				if got := len(family(all, name)); got != counters {
					t.Errorf("%s: %d series; want %d", name, got, counters)
				}
			}
			// Per route: the in-flight gauge, and histogram samples:
			// attempts (10 buckets, +Inf, sum, count), wait (13 buckets
			// +3), operation duration (14 buckets +3, outcome success
			// only) and attempt duration (14 buckets +3, conn unknown and
			// result success only).
			// And the gauge of the Transport's default budget, and the
			// route overflow counter.
			want := 4*counters + tt.routes*(1+13+16+17+17) + 2
			if len(all) != want {
				t.Errorf("%d samples in all; want %d", len(all), want)
			}
			if got, want := all["httpretry_route_overflows_total"], float64(overflows[tt.name]); got != want {
				t.Errorf("route overflows = %v; want %v", got, want)
			}
			if got := sum(all, "httpretry_operations_total"); got != 10_000 {
				t.Errorf("operations = %v; want 10000", got)
			}
			if bound := maxSamples(tt.routes); len(all) > bound {
				t.Errorf("%d samples; the design allows at most %d", len(all), bound)
			}
		})
	}
}

// TestMaxSamplesAsDocumented pins the README's figure to the label design.
func TestMaxSamplesAsDocumented(t *testing.T) {
	if got := maxSamples(DefaultMaxRoutes + 1); got != 139_569 {
		t.Errorf("at most %d samples with the defaults; the README says 139,569", got)
	}
}

// maxSamples is the most samples the label design allows with the
// default buckets and routes distinct route values, as the package
// documentation states it.
func maxSamples(routes int) int {
	const (
		durationSamples = 14 + 1 + 2 // DurationBuckets, +Inf, sum and count
		waitSamples     = 13 + 1 + 2 // WaitBuckets, +Inf, sum and count
		phaseSamples    = 11 + 1 + 2 // PhaseBuckets, +Inf, sum and count
	)
	perRoute := labels.NumMethods*labels.NumOutcomes*labels.NumReasons + // operations
		labels.NumMethods*labels.NumAttemptKinds*labels.NumResults + // attempts by result
		3*labels.NumMethods*labels.NumAttemptKinds + // started, successes, timeouts (2 kinds each)
		1 + // attempts in flight
		(DefaultAttemptBuckets + 1 + 2) + waitSamples + // attempts and wait histograms
		labels.NumOutcomes*durationSamples + // operation duration
		labels.NumConns*labels.NumResults*durationSamples + // attempt duration
		labels.NumWaitCauses*waitSamples + // retry waits
		4*labels.NumMethods // hedges sent, won, losers canceled, refused
	// Phases, idempotency events, the two budget gauges, the budget
	// state changes, the route overflows, and the hedge delay gauge of at
	// most as many latency keys as route values are kept.
	return routes*perRoute + labels.NumPhases*phaseSamples + labels.NumEvents + 2 + len(metricsutil.States) + 1 + (routes - 1)
}
