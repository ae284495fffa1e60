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

// TestRetryWaitSplitsServerAndBackoff: a wait after a 429 with
// Retry-After: 2 lasts the server's 2 s plus the Transport's own 100 ms
// of jitter; the server's part is counted under cause retry_after and
// the Transport's under backoff, so that the two sums add up to the
// operation's wait and "time the server asked for" is exact.
func TestRetryWaitSplitsServerAndBackoff(t *testing.T) {
	fc := clockwork.NewFakeClock()
	c, reg := newCollector(t, Options{Route: func(*http.Request) string { return "/quota" }})
	tr := &httpretry.Transport{Clock: fc, BaseDelay: 100 * ms, Jitter: identity, Budget: httpretry.Unlimited,
		Base: httptestutil.NewTransport(fc, httptestutil.Step{Status: 429, RetryAfter: "2"}, httptestutil.Step{Status: 200})}
	c.Instrument(tr)
	ch := start(tr, mustRequest(t, context.Background(), "GET", "http://api.test/quota"))
	advance(t, fc, 1, 2100*time.Millisecond)
	if r := await(t, ch); r.err == nil {
		r.resp.Body.Close()
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_retry_wait_seconds_sum", map[string]float64{
		`httpretry_retry_wait_seconds_sum{cause="retry_after",route="/quota"}`: 2,
		`httpretry_retry_wait_seconds_sum{cause="backoff",route="/quota"}`:     0.1,
	})
	checkFamily(t, all, "httpretry_operation_wait_seconds_sum", map[string]float64{
		`httpretry_operation_wait_seconds_sum{route="/quota"}`: 2.1,
	})
}

// TestRetryWaitIsTheTimeWaited: a wait the caller cuts short counts in
// httpretry_retry_wait_seconds for the time actually waited, as it does
// in httpretry_operation_wait_seconds, so that the two agree: half a
// second of a wait of 2 s (Retry-After) and 100 ms of jitter is half a
// second of retry_after and no backoff.
func TestRetryWaitIsTheTimeWaited(t *testing.T) {
	fc := clockwork.NewFakeClock()
	c, reg := newCollector(t, Options{Route: func(*http.Request) string { return "/quota" }})
	tr := &httpretry.Transport{Clock: fc, BaseDelay: 100 * ms, Jitter: identity, Budget: httpretry.Unlimited,
		Base: httptestutil.NewTransport(fc, httptestutil.Step{Status: 429, RetryAfter: "2"})}
	c.Instrument(tr)
	ctx, cancel := context.WithCancel(context.Background())
	ch := start(tr, mustRequest(t, ctx, "GET", "http://api.test/quota"))
	advance(t, fc, 1, 500*time.Millisecond) // half a second of the 2.1 s wait
	cancel()
	if r := await(t, ch); r.err == nil {
		t.Fatal("a canceled wait returned a response")
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_operation_wait_seconds_sum", map[string]float64{
		`httpretry_operation_wait_seconds_sum{route="/quota"}`: 0.5,
	})
	checkFamily(t, all, "httpretry_retry_wait_seconds_sum", map[string]float64{
		`httpretry_retry_wait_seconds_sum{cause="retry_after",route="/quota"}`: 0.5,
	})
	checkFamily(t, all, "httpretry_retry_wait_seconds_count", map[string]float64{
		`httpretry_retry_wait_seconds_count{cause="retry_after",route="/quota"}`: 1,
	})
}
