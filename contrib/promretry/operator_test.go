package promretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// TestOperatorScenario runs, into one Collector, what an operator paged
// at night must tell apart: a dependency failing twice then answering, a
// quota answering 429 with Retry-After, a connection reset, an operation
// out of time, retries refused by the budget, and a Redis-shared budget
// fallen back to its local bucket. It scrapes a real promhttp handler and
// checks every new series with its exact value.
func TestOperatorScenario(t *testing.T) {
	fc := clockwork.NewFakeClock()
	fleet := &sharedBudget{tokens: 7}
	c, reg := newCollector(t, Options{Budget: fleet, Route: func(r *http.Request) string { return r.URL.Path }})
	run := func(path string, tr *httpretry.Transport, waits ...time.Duration) {
		t.Helper()
		tr.Clock, tr.BaseDelay, tr.Jitter = fc, 100*ms, identity
		if tr.Budget == nil {
			tr.Budget = httpretry.Unlimited
		}
		c.Instrument(tr)
		ch := start(tr, mustRequest(t, context.Background(), "GET", "http://api.test"+path))
		for _, d := range waits {
			advance(t, fc, 1, d)
		}
		if r := await(t, ch); r.err == nil {
			r.resp.Body.Close()
		}
	}
	steps := func(s ...httptestutil.Step) *httptestutil.Transport { return httptestutil.NewTransport(fc, s...) }
	run("/flaky", &httpretry.Transport{Base: steps(httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})},
		100*ms, 200*ms)
	run("/quota", &httpretry.Transport{Base: steps(httptestutil.Step{Status: 429, RetryAfter: "2"}, httptestutil.Step{Status: 200})},
		2100*ms)
	run("/reset", &httpretry.Transport{Base: steps(httptestutil.Step{Err: httptestutil.ErrReset}, httptestutil.Step{Status: 200})},
		100*ms)
	// 300 ms attempts: the first, a 100 ms wait, the second; the next wait
	// and the minimum attempt time do not fit in the 500 ms Timeout.
	slow := &httpretry.Transport{Base: steps(httptestutil.Step{Status: 503, Delay: 200 * ms}), Timeout: 500 * ms}
	slowCh := make(chan struct{})
	go func() { defer close(slowCh); run("/slow", slow) }()
	advance(t, fc, 2, 200*ms) // the first attempt's 200 ms (the deadline also waits)
	advance(t, fc, 2, 100*ms) // the wait
	advance(t, fc, 2, 200*ms) // the second attempt
	<-slowCh
	run("/budget", &httpretry.Transport{Base: steps(httptestutil.Step{Status: 503}), Budget: httpretry.NewTokenBucket(0, 0)})
	fleet.fallBack()
	c.BudgetStateChange("local")

	// The flaky route waited 100 ms then 200 ms, summed as the histogram
	// sums them, in floating point.
	flakyWaits := 0.0
	for _, w := range []float64{0.1, 0.2} {
		flakyWaits += w
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",route="/flaky"}`:              1,
		`httpretry_attempts_total{kind="retry",method="GET",result="5xx",route="/flaky"}`:                1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",route="/flaky"}`:            1,
		`httpretry_attempts_total{kind="initial",method="GET",result="429",route="/quota"}`:              1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",route="/quota"}`:            1,
		`httpretry_attempts_total{kind="initial",method="GET",result="connection_error",route="/reset"}`: 1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",route="/reset"}`:            1,
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",route="/slow"}`:               1,
		`httpretry_attempts_total{kind="retry",method="GET",result="5xx",route="/slow"}`:                 1,
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",route="/budget"}`:             1,
	})
	checkFamily(t, all, "httpretry_attempts_started_total", map[string]float64{
		`httpretry_attempts_started_total{kind="initial",method="GET",route="/flaky"}`:  1,
		`httpretry_attempts_started_total{kind="retry",method="GET",route="/flaky"}`:    2,
		`httpretry_attempts_started_total{kind="initial",method="GET",route="/quota"}`:  1,
		`httpretry_attempts_started_total{kind="retry",method="GET",route="/quota"}`:    1,
		`httpretry_attempts_started_total{kind="initial",method="GET",route="/reset"}`:  1,
		`httpretry_attempts_started_total{kind="retry",method="GET",route="/reset"}`:    1,
		`httpretry_attempts_started_total{kind="initial",method="GET",route="/slow"}`:   1,
		`httpretry_attempts_started_total{kind="retry",method="GET",route="/slow"}`:     1,
		`httpretry_attempts_started_total{kind="initial",method="GET",route="/budget"}`: 1,
	})
	checkFamily(t, all, "httpretry_retry_wait_seconds_sum", map[string]float64{
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/flaky"}`:     flakyWaits,
		`httpretry_retry_wait_seconds_sum{cause="retry_after",route="/quota"}`: 2,
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/quota"}`:     0.1,
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/reset"}`:     0.1,
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/slow"}`:      0.1,
	})
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="/flaky"}`:                    1,
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="/quota"}`:                    1,
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="/reset"}`:                    1,
		`httpretry_operations_total{method="GET",outcome="error_response",reason="deadline_exhausted",route="/slow"}`: 1,
		`httpretry_operations_total{method="GET",outcome="error_response",reason="budget_exhausted",route="/budget"}`: 1,
	})
	checkFamily(t, all, "httpretry_operation_duration_seconds_sum", map[string]float64{
		`httpretry_operation_duration_seconds_sum{outcome="success",route="/flaky"}`:         0.3,
		`httpretry_operation_duration_seconds_sum{outcome="success",route="/quota"}`:         2.1,
		`httpretry_operation_duration_seconds_sum{outcome="success",route="/reset"}`:         0.1,
		`httpretry_operation_duration_seconds_sum{outcome="error_response",route="/slow"}`:   0.5,
		`httpretry_operation_duration_seconds_sum{outcome="error_response",route="/budget"}`: 0,
	})
	for _, route := range []string{"/flaky", "/quota", "/reset", "/slow", "/budget"} {
		if got := all[`httpretry_attempts_in_flight{route="`+route+`"}`]; got != 0 {
			t.Errorf("attempts in flight on %s = %v; want 0", route, got)
		}
	}
	checkFamily(t, all, "httpretry_budget_tokens", map[string]float64{})
	checkFamily(t, all, "httpretry_budget_shared", map[string]float64{`httpretry_budget_shared`: 0})
	checkFamily(t, all, "httpretry_budget_state_changes_total", map[string]float64{
		`httpretry_budget_state_changes_total{state="local"}`: 1,
	})
	checkFamily(t, all, "httpretry_route_overflows_total", map[string]float64{`httpretry_route_overflows_total`: 0})
}
