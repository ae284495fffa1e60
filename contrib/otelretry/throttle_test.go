package otelretry

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/internal/throttleseam"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestMetricsThrottled: operations a Throttle refuses are counted as
// operations with stop_reason throttled and outcome error, and make no
// attempt: 10 attempts reach the failing server (the throttle refuses
// nothing on fewer than 10 requests counted), the other 6 operations are
// refused.
func TestMetricsThrottled(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	budget := httpretry.NewTokenBucket(1, 0)
	m, metrics := newMetrics(t, Options{Budget: budget})
	tr := hook(&httpretry.Transport{Base: base, Clock: fc, MaxAttempts: 1, Budget: budget,
		Throttle: drawing(&throttle.Throttle{Window: 800 * time.Millisecond}, func() float64 { return 0 })}, m)
	refused := 0
	for range 16 {
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://api.test/books/1", nil))
		if err == nil {
			resp.Body.Close()
			continue
		}
		if !errors.Is(err, throttle.ErrThrottled) {
			t.Fatalf("err = %v; want ErrThrottled", err)
		}
		refused++
	}
	if refused != 6 {
		t.Fatalf("%d refused; want 6", refused)
	}
	lines := metrics()
	want := []string{
		"httpretry.client.operations{" + get + ",httpretry.outcome=error,httpretry.stop_reason=throttled," + route + "} 6",
		"httpretry.client.operations{" + get + ",httpretry.outcome=error_response,httpretry.stop_reason=attempts_exhausted," + route + "} 10",
		"httpretry.client.attempts.started{" + get + ",httpretry.attempt.kind=initial," + route + "} 10",
	}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("missing %s\nin:\n%s", w, strings.Join(lines, "\n"))
		}
	}
}

// drawing makes th draw the number of each decision that may refuse from
// draw (see throttleseam.SetDraw), and returns th.
func drawing(th *throttle.Throttle, draw func() float64) *throttle.Throttle {
	throttleseam.SetDraw(th, draw)
	return th
}
