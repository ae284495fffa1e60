package httpretry

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack5QuotaRouteMemoryEvictedByIDRoutes: GitHub-style resources,
// "search" spent (a 429 naming it, X-RateLimit-Remaining: 0, an hour to
// the reset), "core" with plenty left. docs/overload.md: a request on a
// route known to draw from a spent quota is refused until that quota's
// group resets. The API puts object IDs in the first path segment
// (GET /4711, as gist-like APIs do): 32 calls to distinct IDs, one a
// second, each a route of its own drawing from core, evict the one
// route that mattered, GET /search, and the next search meets a second
// 429 in the same window. The issue promises at most one 429 per quota
// window per process; the table is filled first-in first-out, by routes
// that all draw from the same, unspent, quota.
func TestAttack5QuotaRouteMemoryEvictedByIDRoutes(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &resourceServer{left: map[string]int{"core": 1000, "search": 0}, tooMany: map[string]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	call := func(path string) error { return get(t, tr, "https://api.test"+path) }
	call("/repos")  // core held
	call("/search") // 429, search spent for the hour; route remembered
	if err := call("/search"); !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Fatalf("search spent, route known: err = %v, want ErrQuotaExhausted", err)
	}
	const quotaRoutes = 32 // the routes a destination remembers
	for i := range quotaRoutes {
		fc.Advance(time.Second)
		call("/" + strconv.Itoa(4711+i))
	}
	fc.Advance(time.Second)
	err := call("/search")
	srv.mu.Lock()
	n := srv.tooMany["search"]
	srv.mu.Unlock()
	if n > 1 {
		t.Errorf("search spent for an hour, then %d core calls to /<id> routes: GET /search sent again (err %v), %d 429s for search in one window; want at most 1 (issue: at most one 429 per quota window per process; docs/overload.md: a request on a route known to draw from a spent quota is refused until that quota's group resets)", quotaRoutes, err, n)
	}
}
