package httpretry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestQuotaReadAgainWhenFieldsAppear: a destination that sent no
// rate-limit fields for quotaMisses responses, then starts to (with none
// left), is read again from a sample of its responses, before any 429:
// its operations are then refused locally.
func TestQuotaReadAgainWhenFieldsAppear(t *testing.T) {
	t.Parallel()
	// The throttle reads 16 responses in a row without fields, then
	// samples one at each fold of 64 accepts.
	const quotaMisses, pendingFold = 16, 64
	var n atomic.Int64
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		if n.Add(1) > quotaMisses {
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", "60")
		}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	for i := range quotaMisses + 2*pendingFold {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if errors.Is(err, throttle.ErrQuotaExhausted) {
			return
		}
		if err != nil {
			t.Fatalf("operation %d: %v", i+1, err)
		}
		resp.Body.Close()
	}
	t.Errorf("%d operations, the last %d answered with X-RateLimit-Remaining: 0: none refused; want the fields read again within %d responses", quotaMisses+2*pendingFold, 2*pendingFold, pendingFold)
}

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

// TestQuotaHotDestinationIsSampledToo: a destination that sent no
// rate-limit fields for 16 responses is read again, for one response in
// 64, when one carries fields, before any 429. A destination that had a
// single 503 (hot, an overload signal) is sampled as a cold one is: 300
// responses with fields, the count falling to 0, are read, and the quota's
// end is learned before a 429.
func TestQuotaHotDestinationIsSampledToo(t *testing.T) {
	t.Parallel()
	for _, hot := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &lateMeteringServer{left: 300}
		tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
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
