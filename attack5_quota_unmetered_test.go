package httpretry

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// meteredRouteServer meters only the routes under /m: a quota of limit
// requests per window (windows from the clock's zero), announced in
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds, rounded up),
// optionally X-RateLimit-Limit; past it, 429. Any other route answers 200
// without rate-limit fields and does not draw from the quota.
type meteredRouteServer struct {
	sendLimit bool

	mu sync.Mutex
	fixedWindow
	tooMany map[int64]int
	lastR   int
}

func (s *meteredRouteServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.URL.Path, "/m") {
		return response(req, 200, ""), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, admitted, left, reset := s.take()
	status := 200
	if !admitted {
		status = 429
		s.tooMany[n]++
	}
	s.lastR = left
	resp := response(req, status, "")
	if s.sendLimit {
		resp.Header.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	}
	resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(left))
	resp.Header.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	return resp, nil
}

// TestAttack5QuotaUnmeteredRoutesDoNotSpendTheMeteredQuota: one caller,
// one request at a time (nothing in flight when a response is read), to
// an API whose gateway meters 1 route in 20 (docs/overload.md: "One that
// sends them on some routes only (a health check or a 404 from a route
// the gateway does not meter) is still paced by the others"; "A response
// in the same window sets the count to the server's when nothing admitted
// from it is still in flight"). The metered route's 200s say 90 and more
// remain, yet the process refuses the destination locally: the responses
// without fields never end their request's count in flight (only update
// decrements inflight), so every later answer is taken as min(local,
// server) and the local count, one per request on any route, runs out.
// The promise: a healthy server with quota left must not be refused.
func TestAttack5QuotaUnmeteredRoutesDoNotSpendTheMeteredQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &meteredRouteServer{fixedWindow: newFixedWindow(fc, 100, time.Hour), sendLimit: true, tooMany: map[int64]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	call := func(path string) error { return get(t, tr, "https://api.test"+path) }
	for i := range 200 {
		path := "/x/" + strconv.Itoa(i)
		if i%20 == 0 {
			path = "/m/" + strconv.Itoa(i)
		}
		if err := call(path); errors.Is(err, throttle.ErrThrottled) {
			srv.mu.Lock()
			r := srv.lastR
			srv.mu.Unlock()
			t.Fatalf("request %d (%s), one at a time, 1 route in 20 metered: refused locally (%v) while the metered route's last response said %d of 100 remain in the window; want no refusal: docs/overload.md, a response with nothing in flight sets the count to the server's, and a destination metering some routes only is paced by those", i, path, err, r)
		}
		fc.Advance(time.Second)
	}
}
