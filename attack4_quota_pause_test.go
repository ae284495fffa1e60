package httpretry

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// pausingServer announces its quota in RateLimit (plenty left) until
// paused; then, as a secondary limit does (GitHub's abuse limit, a
// gateway's concurrency limit), it answers 429 with only a Retry-After.
type pausingServer struct {
	clock clockwork.Clock

	mu      sync.Mutex
	until   time.Time // the pause's end; zero when not paused
	pause   bool      // the next request starts a pause of 30s
	tooMany int
}

func (s *pausingServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.pause {
		s.pause, s.until = false, now.Add(30*time.Second)
	}
	if now.Before(s.until) {
		s.tooMany++
		resp := response(req, 429, "")
		resp.Header.Set("Retry-After", "30")
		return resp, nil
	}
	resp := response(req, 200, "")
	resp.Header.Set("RateLimit", `"default";r=50;t=60`)
	resp.Header.Set("RateLimit-Policy", `"default";q=100;w=60`)
	return resp, nil
}

// TestAttack4QuotaRetryAfterOnlyPausesADestinationWithAKnownQuota: a
// destination that announces its quota in RateLimit answers one 429
// with "Retry-After: 30" and no rate-limit fields. docs/overload.md: "A
// 429 spends the quota. Until when ...: else the Retry-After the server
// asked", "Once a response says a destination's quota is spent, new
// operations to it are refused at once until the reset", "a process
// gets at most one 429 per quota window". For a destination that sent
// no fields before, the same 429 does pause it. Here the 429 lands in a
// quota of its own (unnamed) beside "default", a second group; with two
// groups a request is refused only when both are spent, so every
// following operation in the 30s is sent and meets a 429 too.
func TestAttack4QuotaRetryAfterOnlyPausesADestinationWithAKnownQuota(t *testing.T) {
	t.Parallel()
	for _, known := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &pausingServer{clock: fc}
		if !known {
			srv.until = fc.Now().Add(30 * time.Second) // 429 from the first request on
		}
		tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
		call := func() error { return get(t, tr, "http://api.test/") }
		if known {
			if err := call(); err != nil { // 200, RateLimit: "default";r=50;t=60
				t.Fatal(err)
			}
			srv.mu.Lock()
			srv.pause = true
			srv.mu.Unlock()
		}
		call() // the 429 with Retry-After: 30
		var errs []string
		for range 5 {
			fc.Advance(time.Second)
			err := call()
			if !errors.Is(err, throttle.ErrThrottled) {
				errs = append(errs, errString(err))
			}
		}
		srv.mu.Lock()
		if srv.tooMany > 1 {
			t.Errorf("quota known from RateLimit before the 429: %v; a 429 with Retry-After: 30, then 5 operations within the 30s: %d 429s in all (operations not refused: %q); want 1 (docs/overload.md: a 429 spends the quota until the Retry-After the server asked; new operations are refused until then; at most one 429 per quota window)", known, srv.tooMany, errs)
		}
		srv.mu.Unlock()
	}
}
