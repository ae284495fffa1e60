package promretry

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/internal/throttleseam"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestThrottledOperationsCounted: operations a Throttle refuses are
// counted, scraped from a real promhttp handler, as operations with
// reason "throttled" and outcome "error", with no attempt: 10 attempts
// reach the failing server (the throttle refuses nothing on fewer than
// 10 requests counted), the other 6 operations are refused.
func TestThrottledOperationsCounted(t *testing.T) {
	c, reg := newCollector(t, Options{})
	const series = `httpretry_operations_total{method="GET",outcome="error",reason="throttled",route="api.test"}`
	fc := clockwork.NewFakeClock()
	tr := &httpretry.Transport{Base: httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}), Clock: fc,
		MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{Window: 800 * time.Millisecond}, func() float64 { return 0 })}
	c.Instrument(tr)
	refused := 0
	for range 16 {
		req, err := http.NewRequest("GET", "http://api.test/books/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			continue
		}
		if !errors.Is(err, throttle.ErrThrottled) {
			t.Fatalf("err = %v; want ErrThrottled", err)
		}
		refused++
	}
	all := samples(scrape(t, reg))
	if got := all[series]; got != 6 || refused != 6 {
		t.Errorf("%s = %v, %d refused; want 6", series, got, refused)
	}
	if got := sum(all, "httpretry_attempts_started_total"); got != 10 {
		t.Errorf("attempts started = %v; want 10", got)
	}
	if got := sum(all, "httpretry_operations_total", `reason="attempts_exhausted"`); got != 10 {
		t.Errorf("attempts_exhausted operations = %v; want 10", got)
	}
}

// drawing makes th draw the number of each decision that may refuse from
// draw (see throttleseam.SetDraw), and returns th.
func drawing(th *throttle.Throttle, draw func() float64) *throttle.Throttle {
	throttleseam.SetDraw(th, draw)
	return th
}
