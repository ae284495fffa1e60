package promretry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// TestAttemptConnectionFields records synthetic attempts carrying the
// connection fields, as a Transport whose Base is built on http.Transport
// reports them.
func TestAttemptConnectionFields(t *testing.T) {
	c, reg := newCollector(t, Options{})
	req := httptest.NewRequest("GET", "http://api.test/books/1", nil)
	attempts := []httpretry.Attempt{
		// A new connection: DNS, connect and TLS, all inside ConnWait.
		{Number: 1, Status: 503, Duration: 300 * ms, Wait: 100 * ms, Conn: httpretry.ConnNew,
			ConnWait: 120 * ms, DNS: 20 * ms, Connect: 40 * ms, TLSHandshake: 60 * ms, FirstByte: 150 * ms},
		// A reused one: only the pool wait and the first byte.
		{Number: 2, Status: 200, Duration: 30 * ms, Conn: httpretry.ConnReused,
			ConnWait: time.Millisecond, FirstByte: 25 * ms},
		// No connection reported at all.
		{Number: 1, Err: httptestErr{}, Duration: 2 * ms},
	}
	for _, a := range attempts {
		c.OnAttempt(req, a)
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_attempt_duration_seconds_count", map[string]float64{
		`httpretry_attempt_duration_seconds_count{conn="new",result="5xx",route="api.test"}`:        1,
		`httpretry_attempt_duration_seconds_count{conn="reused",result="success",route="api.test"}`: 1,
		`httpretry_attempt_duration_seconds_count{conn="unknown",result="other",route="api.test"}`:  1,
	})
	checkFamily(t, all, "httpretry_attempt_duration_seconds_sum", map[string]float64{
		`httpretry_attempt_duration_seconds_sum{conn="new",result="5xx",route="api.test"}`:        0.3,
		`httpretry_attempt_duration_seconds_sum{conn="reused",result="success",route="api.test"}`: 0.03,
		`httpretry_attempt_duration_seconds_sum{conn="unknown",result="other",route="api.test"}`:  0.002,
	})
	checkFamily(t, all, "httpretry_attempt_phase_seconds_count", map[string]float64{
		`httpretry_attempt_phase_seconds_count{phase="conn_wait"}`:  2,
		`httpretry_attempt_phase_seconds_count{phase="dns"}`:        1,
		`httpretry_attempt_phase_seconds_count{phase="connect"}`:    1,
		`httpretry_attempt_phase_seconds_count{phase="tls"}`:        1,
		`httpretry_attempt_phase_seconds_count{phase="first_byte"}`: 2,
	})
	checkFamily(t, all, "httpretry_attempt_phase_seconds_sum", map[string]float64{
		`httpretry_attempt_phase_seconds_sum{phase="conn_wait"}`:  0.121,
		`httpretry_attempt_phase_seconds_sum{phase="dns"}`:        0.02,
		`httpretry_attempt_phase_seconds_sum{phase="connect"}`:    0.04,
		`httpretry_attempt_phase_seconds_sum{phase="tls"}`:        0.06,
		`httpretry_attempt_phase_seconds_sum{phase="first_byte"}`: 0.175,
	})
	checkFamily(t, all, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",route="api.test"}`:   1,
		`httpretry_attempts_total{kind="initial",method="GET",result="other",route="api.test"}`: 1,
		`httpretry_attempts_total{kind="retry",method="GET",result="success",route="api.test"}`: 1,
	})
	checkFamily(t, all, "httpretry_attempt_successes_total", map[string]float64{
		`httpretry_attempt_successes_total{kind="retry",method="GET",route="api.test"}`: 1,
	})
	// A wait is recorded when it ends (OnWait), not when an attempt
	// reports it scheduled.
	if got := family(all, "httpretry_retry_wait_seconds_sum"); len(got) != 0 {
		t.Errorf("OnAttempt recorded waits %v; want none until OnWait", got)
	}
	c.OnWait(req, httpretry.Wait{After: 1, Waited: 100 * ms})
	all = samples(scrape(t, reg))
	// The first attempt's 100ms wait was the Transport's own backoff.
	checkFamily(t, all, "httpretry_retry_wait_seconds_sum", map[string]float64{
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="api.test"}`: 0.1,
	})
}

type httptestErr struct{}

func (httptestErr) Error() string { return "synthetic failure" }

func TestAttemptTimeoutKinds(t *testing.T) {
	c, reg := newCollector(t, Options{})
	req := httptest.NewRequest("PATCH", "http://api.test/", nil)
	for _, err := range []error{
		fmt.Errorf("wrapped: %w", httpretry.ErrAttemptTimeout),
		httpretry.ErrIdleTimeout,
		fmt.Errorf("twice: %w", fmt.Errorf("wrapped: %w", httpretry.ErrIdleTimeout)),
		httptestErr{},
	} {
		c.OnAttempt(req, httpretry.Attempt{Number: 1, Err: err})
	}
	checkFamily(t, samples(scrape(t, reg)), "httpretry_attempt_timeouts_total", map[string]float64{
		`httpretry_attempt_timeouts_total{kind="attempt",method="PATCH",route="api.test"}`: 1,
		`httpretry_attempt_timeouts_total{kind="idle",method="PATCH",route="api.test"}`:    2,
	})
}

// TestAttemptSuccess pins which attempts count as successes: a response
// below 400, without an error.
func TestAttemptSuccess(t *testing.T) {
	c, reg := newCollector(t, Options{})
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	for _, a := range []httpretry.Attempt{
		{Number: 1, Status: 200}, {Number: 1, Status: 204}, {Number: 1, Status: 304}, {Number: 1, Status: 399},
		{Number: 1, Status: 400}, {Number: 1, Status: 503}, {Number: 1, Err: httptestErr{}}, {Number: 1},
	} {
		c.OnAttempt(req, a)
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_attempt_successes_total", map[string]float64{
		`httpretry_attempt_successes_total{kind="initial",method="GET",route="api.test"}`: 4,
	})
	checkFamily(t, all, "httpretry_attempts_total", map[string]float64{
		`httpretry_attempts_total{kind="initial",method="GET",result="success",route="api.test"}`: 4,
		`httpretry_attempts_total{kind="initial",method="GET",result="4xx",route="api.test"}`:     1,
		`httpretry_attempts_total{kind="initial",method="GET",result="5xx",route="api.test"}`:     1,
		`httpretry_attempts_total{kind="initial",method="GET",result="other",route="api.test"}`:   2,
	})
}

// TestHooksAllocateNothing calls the hooks directly with canned values:
// once a combination's series exist, recording it allocates nothing.
func TestHooksAllocateNothing(t *testing.T) {
	c, _ := newCollector(t, Options{})
	req := httptest.NewRequest("GET", "http://api.test/books/1", nil)
	a := httpretry.Attempt{Number: 1, Status: 200, Duration: 20 * ms, Conn: httpretry.ConnReused,
		ConnWait: ms, FirstByte: 15 * ms}
	o := httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200, Elapsed: 20 * ms}
	retry := httpretry.Attempt{Number: 2, Err: fmt.Errorf("x: %w", httpretry.ErrAttemptTimeout), Duration: time.Second}
	failed := httpretry.Outcome{Attempts: 3, Reason: httpretry.AttemptsExhausted, Err: retry.Err, Waited: time.Second}
	record := func() {
		c.OnAttempt(req, a)
		c.OnDone(req, o)
		c.OnAttempt(req, retry)
		c.OnDone(req, failed)
		c.IdempotencyEvent(string(idempotency.KindReplayed))
	}
	record() // creates the series
	if n := testing.AllocsPerRun(1000, record); n != 0 {
		t.Errorf("%v allocations per recording; want 0", n)
	}
}

// TestConcurrentRecording records from many goroutines at once (run it
// with -race): counts must add up exactly.
func TestConcurrentRecording(t *testing.T) {
	c, reg := newCollector(t, Options{Route: func(r *http.Request) string { return r.URL.Path }, MaxRoutes: 5})
	const goroutines, each = 8, 500
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				req := httptest.NewRequest("GET", fmt.Sprintf("http://api.test/r%d", (g+i)%10), nil)
				c.OnAttempt(req, httpretry.Attempt{Number: 1, Status: 200})
				c.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200})
			}
		}()
	}
	for range goroutines {
		<-done
	}
	all := samples(scrape(t, reg))
	if got := sum(all, "httpretry_operations_total"); got != goroutines*each {
		t.Errorf("operations = %v; want %d", got, goroutines*each)
	}
	if got := len(family(all, "httpretry_operations_total")); got != 6 {
		t.Errorf("%d operation series; want 6 (5 routes and other)", got)
	}
}
