package httpretry

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// lateMeteringServer sends no rate-limit fields until metering is set;
// then it meters a quota of left requests for the hour, announced in
// X-RateLimit-Remaining and -Reset, past it 429. fail503, when set,
// answers the next request 503.
type lateMeteringServer struct {
	mu       sync.Mutex
	metering bool
	fail503  bool
	left     int
	tooMany  int
}

func (s *lateMeteringServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail503 {
		s.fail503 = false
		return response(req, 503, ""), nil
	}
	if !s.metering {
		return response(req, 200, ""), nil
	}
	status := 200
	if s.left == 0 {
		status = 429
		s.tooMany++
	} else {
		s.left--
	}
	resp := response(req, status, "")
	resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(s.left))
	resp.Header.Set("X-RateLimit-Reset", "3600")
	return resp, nil
}

// TestAttack5QuotaHotDestinationIsSampledToo: docs/overload.md: a
// destination that sent no rate-limit fields for 16 responses is read
// again, for one response in 64, whose headers are looked up: "when it
// carries rate-limit headers, reading starts again, before any 429".
// A cold destination is (the control below gets no 429). One that had a
// single 503 (hot, an overload signal) is never sampled: record sends
// its responses to recordSlow, which reads only what wants allows, and
// sample is called only on the cold path. 300 responses with fields,
// the count falling to 0, go unread, and the quota's end is learned
// from a 429.
func TestAttack5QuotaHotDestinationIsSampledToo(t *testing.T) {
	t.Parallel()
	for _, hot := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &lateMeteringServer{left: 300}
		tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
		call := func() {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.test/a", nil))
			if err == nil {
				resp.Body.Close()
			}
		}
		for range 20 {
			call() // no fields: reading stops after 16
		}
		if hot {
			srv.mu.Lock()
			srv.fail503 = true
			srv.mu.Unlock()
			call()
		}
		srv.mu.Lock()
		srv.metering = true
		srv.mu.Unlock()
		for range 400 {
			call()
		}
		srv.mu.Lock()
		n := srv.tooMany
		srv.mu.Unlock()
		if n > 0 {
			t.Errorf("destination hot (one 503 before): %v; then 300 responses whose X-RateLimit-Remaining fell to 0, 400 calls: %d 429s; want none (docs/overload.md: one response in 64 is looked up, and when it carries rate-limit headers reading starts again, before any 429)", hot, n)
		}
	}
}
