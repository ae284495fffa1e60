package httpretry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
		srv := &xQuotaServer{clock: fc, zero: fc.Now(), limit: 3, window: 10 * time.Second, tooMany: map[int64]int{}}
		g := &gatedX{srv: srv}
		tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: &Throttle{Rand: admitAll}}
		call := func(path string) error {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test"+path, nil))
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		if plainFirst {
			call("/plain")
		}
		call("/a") // 200, X-RateLimit-Remaining: 2
		g.mu.Lock()
		g.gate, g.entered = make(chan struct{}), 0
		g.mu.Unlock()
		var wg sync.WaitGroup
		var mu sync.Mutex
		refused := 0
		for range 6 {
			wg.Go(func() {
				if err := call("/a"); errors.Is(err, ErrThrottled) {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			})
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			g.mu.Lock()
			n := g.entered
			g.mu.Unlock()
			mu.Lock()
			r := refused
			mu.Unlock()
			if n+r >= 6 {
				break
			}
		}
		close(g.gate)
		wg.Wait()
		srv.mu.Lock()
		if n := srv.tooMany[0]; n > 1 {
			t.Errorf("first call to an unmetered route: %v; then a 200 with X-RateLimit-Remaining: 2 and 6 concurrent callers: %d 429s in one window; want at most 1 (docs/overload.md: a destination that sends rate-limit fields on some routes only is still paced by the others; a process gets at most one 429 per quota window)", plainFirst, n)
		}
		srv.mu.Unlock()
	}
}
