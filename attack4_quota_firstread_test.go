package httpretry

import (
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack4QuotaUnmeteredFirstRouteDoesNotBlindThePacing: a process's
// first call to an API is to a route the gateway does not meter (a
// health check, a 404: no rate-limit fields); every later call is to a
// metered route whose 200s say X-RateLimit-Remaining. docs/overload.md:
// "one that sends them on some routes only (a 404 from a route the
// gateway does not meter) is still paced by the others", and "a process
// gets at most one 429 per quota window". The header-less first answer
// turns reading off until a 429 arrives, so the 200 saying 2 remain is
// never read, and 6 concurrent callers all reach the server: 4 429s in
// one window. Without the first call to /plain, the same callers get
// none.
func TestAttack4QuotaUnmeteredFirstRouteDoesNotBlindThePacing(t *testing.T) {
	t.Parallel()
	for _, plainFirst := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &xQuotaServer{fixedWindow: newFixedWindow(fc, 3, 10*time.Second), tooMany: map[int64]int{}}
		g := &gatedBase{base: srv, hold: metered}
		tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
		call := func(path string) error { return get(t, tr, "http://api.test"+path) }
		if plainFirst {
			call("/plain")
		}
		call("/a") // 200, X-RateLimit-Remaining: 2
		g.burst(6, func() error { return call("/a") })
		srv.mu.Lock()
		if n := srv.tooMany[0]; n > 1 {
			t.Errorf("first call to an unmetered route: %v; then a 200 with X-RateLimit-Remaining: 2 and 6 concurrent callers: %d 429s in one window; want at most 1 (docs/overload.md: a destination that sends rate-limit fields on some routes only is still paced by the others; a process gets at most one 429 per quota window)", plainFirst, n)
		}
		srv.mu.Unlock()
	}
}
