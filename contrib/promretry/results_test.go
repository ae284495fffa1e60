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

// TestResultsAndWaitCauses scripts a 429 with Retry-After, a connection
// reset and a keyless POST reset after sending, then scrapes: each
// attempt is counted under its result, each wait under its cause, and
// the latency of operations is split by outcome.
func TestResultsAndWaitCauses(t *testing.T) {
	fc := clockwork.NewFakeClock()
	c, reg := newCollector(t, Options{Route: func(r *http.Request) string { return r.URL.Path }})
	run := func(method, path string, waits []time.Duration, steps ...httptestutil.Step) {
		t.Helper()
		tr := &httpretry.Transport{Base: httptestutil.NewTransport(fc, steps...), Clock: fc,
			BaseDelay: 100 * ms, Jitter: identity, Budget: httpretry.Unlimited}
		c.Instrument(tr)
		ch := start(tr, mustRequest(t, context.Background(), method, "http://api.test"+path))
		for _, d := range waits {
			advance(t, fc, 1, d)
		}
		if r := await(t, ch); r.err == nil {
			r.resp.Body.Close()
		}
	}
	// The server asks for 2 s; the Transport adds its 100 ms jitter.
	run("GET", "/quota", []time.Duration{2100 * ms},
		httptestutil.Step{Status: 429, RetryAfter: "2"}, httptestutil.Step{Status: 200})
	// A reset, then the Transport's own 100 ms backoff.
	run("GET", "/reset", []time.Duration{100 * ms},
		httptestutil.Step{Err: httptestutil.ErrReset}, httptestutil.Step{Status: 200})
	// A keyless POST reset after sending is not retried.
	run("POST", "/orders", nil, httptestutil.Step{Err: httptestutil.ErrReset})
	// A 404 is final: the caller's mistake, not the service's.
	run("GET", "/missing", nil, httptestutil.Step{Status: 404})

	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="429",route="/quota"}`:                1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",route="/quota"}`:              1,
		`httpretry_attempts_total{kind="initial",method="GET",result="connection_error",route="/reset"}`:   1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",route="/reset"}`:              1,
		`httpretry_attempts_total{kind="initial",method="POST",result="connection_error",route="/orders"}`: 1,
		`httpretry_attempts_total{kind="initial",method="GET",result="4xx",route="/missing"}`:              1,
	})
	checkFamily(t, all, "httpretry_retry_wait_seconds_count", map[string]float64{
		`httpretry_retry_wait_seconds_count{cause="retry_after",route="/quota"}`: 1,
		`httpretry_retry_wait_seconds_count{cause="backoff",route="/quota"}`:     1,
		`httpretry_retry_wait_seconds_count{cause="backoff",route="/reset"}`:     1,
	})
	checkFamily(t, all, "httpretry_retry_wait_seconds_sum", map[string]float64{
		`httpretry_retry_wait_seconds_sum{cause="retry_after",route="/quota"}`: 2,
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/quota"}`:     0.1,
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/reset"}`:     0.1,
	})
	checkFamily(t, all, "httpretry_operation_duration_seconds_count", map[string]float64{
		`httpretry_operation_duration_seconds_count{outcome="success",route="/quota"}`:          1,
		`httpretry_operation_duration_seconds_count{outcome="success",route="/reset"}`:          1,
		`httpretry_operation_duration_seconds_count{outcome="unknown",route="/orders"}`:         1,
		`httpretry_operation_duration_seconds_count{outcome="error_response",route="/missing"}`: 1,
	})
	checkFamily(t, all, "httpretry_operation_duration_seconds_sum", map[string]float64{
		`httpretry_operation_duration_seconds_sum{outcome="success",route="/quota"}`:          2.1,
		`httpretry_operation_duration_seconds_sum{outcome="success",route="/reset"}`:          0.1,
		`httpretry_operation_duration_seconds_sum{outcome="unknown",route="/orders"}`:         0,
		`httpretry_operation_duration_seconds_sum{outcome="error_response",route="/missing"}`: 0,
	})
	// A 2.1 s operation falls between the 1 and 2.5 s bounds.
	if got := all[`httpretry_operation_duration_seconds_bucket{le="1",outcome="success",route="/quota"}`]; got != 0 {
		t.Errorf("operations of at most 1 s = %v; want 0", got)
	}
	if got := all[`httpretry_operation_duration_seconds_bucket{le="2.5",outcome="success",route="/quota"}`]; got != 1 {
		t.Errorf("operations of at most 2.5 s = %v; want 1", got)
	}
	checkFamily(t, all, "httpretry_attempts_in_flight", map[string]float64{
		`httpretry_attempts_in_flight{route="/quota"}`:   0,
		`httpretry_attempts_in_flight{route="/reset"}`:   0,
		`httpretry_attempts_in_flight{route="/orders"}`:  0,
		`httpretry_attempts_in_flight{route="/missing"}`: 0,
	})
}

// TestInFlightShowsAHang: an attempt that hangs is counted as started and
// in flight while it hangs, before any timeout ends it.
func TestInFlightShowsAHang(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
	c, reg := newCollector(t, Options{})
	tr := &httpretry.Transport{Base: base, Clock: fc}
	c.Instrument(tr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := start(tr, mustRequest(t, ctx, "GET", "http://api.test/"))
	for deadline := time.Now().Add(guard); base.Hits() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the base")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	during := samples(scrape(t, reg))
	checkFamily(t, during, "httpretry_attempts_in_flight", map[string]float64{`httpretry_attempts_in_flight{route="api.test"}`: 1})
	checkFamily(t, during, "httpretry_attempts_started_total", map[string]float64{
		`httpretry_attempts_started_total{kind="initial",method="GET",route="api.test"}`: 1,
	})
	checkFamily(t, during, "httpretry_attempts_total", map[string]float64{})
	cancel()
	if r := await(t, ch); r.err == nil {
		t.Fatal("a canceled hang returned a response")
	}
	after := samples(scrape(t, reg))
	checkFamily(t, after, "httpretry_attempts_in_flight", map[string]float64{`httpretry_attempts_in_flight{route="api.test"}`: 0})
	checkFamily(t, after, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="canceled",route="api.test"}`: 1,
	})
}
