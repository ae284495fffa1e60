package httpretry

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// strideWorkload runs a sequential client through a Transport on a fake
// clock: each request's Base advances the clock by its latency, so the
// rate is as fast as the latencies say, whatever the machine's load. One
// request in four (at position pos) fetches /blob (slow); the others
// /meta (fast). It returns the learned 98th percentile of the host, with
// no floor.
func strideWorkload(t *testing.T, pos int, loop bool) time.Duration {
	t.Helper()
	const fast, slow = 2 * time.Microsecond, 40 * time.Microsecond
	fc := clockwork.NewFakeClock()
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/blob") {
			fc.Advance(slow)
		} else {
			fc.Advance(fast)
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	})
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{MinDelay: time.Hour}}
	if loop {
		tr.OnAttempt = func(*http.Request, Attempt) {}
	}
	client := &http.Client{Transport: tr}
	for i := range 100_000 {
		path := "/meta"
		if i%4 == pos {
			path = "/blob"
		}
		resp, err := client.Get("http://svc.test" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	d := tr.latencies().Find("svc.test:80")
	if d == nil {
		d = tr.latencies().Find("svc.test")
	}
	if d == nil {
		t.Fatal("no latencies for svc.test")
	}
	q, ok := d.HedgeDelay(1, 0)
	if !ok {
		t.Fatal("no hedge delay learned")
	}
	return q
}

// The adaptive hedge delay of a host whose requests follow a periodic
// pattern (three cheap lookups, then the fetch they name) is its 98th
// percentile, the slow fetch's, at any rate: a stride that times one
// attempt in 4 by count keeps latencies of every position in the
// pattern, on the direct path and on the loop's alike.
func TestAdaptiveDelayOfAPeriodicWorkloadIsItsQuantileAtAnyRate(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 requests per case")
	}
	t.Parallel()
	for _, loop := range []bool{false, true} {
		for pos := range 4 {
			if q := strideWorkload(t, pos, loop); q != 40*time.Microsecond {
				t.Errorf("loop path %v, slow request at %d of 4: learned 98th percentile %v; want 40µs", loop, pos, q)
			}
		}
	}
}
