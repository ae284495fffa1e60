package httpretry

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// dialectServer is an application that announces its quota in RateLimit
// behind a gateway that answers its own 429s with X-RateLimit-* fields
// (Kong, nginx modules and many API gateways write the X- dialect). The
// quota is shared with other clients: spend empties it from outside.
type dialectServer struct {
	mu      sync.Mutex
	left    int
	tooMany int
}

func (s *dialectServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 {
		s.tooMany++
		resp := response(req, 429, "")
		resp.Header.Set("X-RateLimit-Limit", "100")
		resp.Header.Set("X-RateLimit-Remaining", "0")
		resp.Header.Set("X-RateLimit-Reset", "60")
		return resp, nil
	}
	s.left--
	resp := response(req, 200, "")
	resp.Header.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=60`, s.left))
	resp.Header.Set("RateLimit-Policy", `"default";q=100;w=60`)
	return resp, nil
}

// TestAttack4QuotaGatewayDialect429PausesTheDestination: the 200s say
// RateLimit "default" with 20 left; other clients then spend the quota,
// and the gateway answers 429 with "X-RateLimit-Remaining: 0" and a
// reset of 60s. docs/overload.md: "Once a response says a destination's
// quota is spent, new operations to it are refused at once until the
// reset"; "a process gets at most one 429 per quota window". The 429's
// quota is unnamed, a group of its own beside "default", and with two
// groups a request is refused only when both are spent: every operation
// in the next 10s is sent and meets a 429.
func TestAttack4QuotaGatewayDialect429PausesTheDestination(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &dialectServer{left: 21}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	call := func() error { return get(t, tr, "http://api.test/") }
	if err := call(); err != nil { // RateLimit: "default";r=20;t=60
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.left = 0 // spent by other clients
	srv.mu.Unlock()
	sent := 0
	for range 10 {
		if err := call(); !errors.Is(err, throttle.ErrThrottled) {
			sent++
		}
		fc.Advance(time.Second)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.tooMany > 1 {
		t.Errorf("a 429 with X-RateLimit-Remaining: 0 and a reset of 60s, after 200s with RateLimit: %d 429s in 10s, %d of 10 operations sent; want 1 (docs/overload.md: once a response says the quota is spent, new operations are refused until the reset; at most one 429 per quota window)", srv.tooMany, sent)
	}
}
