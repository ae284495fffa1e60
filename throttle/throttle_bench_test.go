package throttle

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkThrottleSuccess measures what the Throttle adds to an
// operation whose destination is healthy: finding its state, admitting
// it, and recording the accepted attempt.
func BenchmarkThrottleSuccess(b *testing.B) {
	th := &Throttle{}
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
	clock := realClock
	b.ReportAllocs()
	for b.Loop() {
		s := th.Dest(req)
		if _, err := th.admit(s, clock); err != nil {
			b.Fatal(err)
		}
		th.record(s, resp, nil, time.Time{}, clock)
	}
}
