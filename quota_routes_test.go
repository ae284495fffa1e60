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

// TestQuotaRouteRefusesOnlyTheSpentQuotasRoutes: with GitHub's core and
// search quotas held and core spent, a request on a route whose
// responses named core is refused; one on the search route, or on a
// route not seen yet, is sent, since search has requests left.
func TestQuotaRouteRefusesOnlyTheSpentQuotasRoutes(t *testing.T) {
	t.Parallel()
	srv := &resourceServer{left: map[string]int{"core": 1, "search": 30}, tooMany: map[string]int{}}
	tr := &Transport{Base: srv, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	call := func(method, path string) error {
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), method, "https://api.test"+path, nil))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, p := range []string{"/search", "/repos/a/b"} { // core: 0 left
		if err := call("GET", p); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
	}
	for _, tt := range []struct {
		method, path string
		refused      bool
	}{
		{"GET", "/repos/c/d", true},
		{"GET", "/search", false},
		{"GET", "/users/e", false}, // not seen: sent, and meets core's 429
		{"POST", "/repos/a/b", false},
	} {
		if err := call(tt.method, tt.path); errors.Is(err, throttle.ErrQuotaExhausted) != tt.refused {
			t.Errorf("%s %s with core spent: %v; want refused %v", tt.method, tt.path, err, tt.refused)
		}
	}
}

// TestQuotaUnmeteredFirstRouteDoesNotBlindThePacing: a process's first
// call to an API is to a route the gateway does not meter (a health check,
// a 404: no rate-limit fields); every later call is to a metered route
// whose 200s say X-RateLimit-Remaining. The header-less first answer does
// not turn reading off: the 200 saying 2 remain is read, and of 6
// concurrent callers at most one meets a 429 in the window.
func TestQuotaUnmeteredFirstRouteDoesNotBlindThePacing(t *testing.T) {
	t.Parallel()
	for _, plainFirst := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &xQuotaServer{fixedWindow: newFixedWindow(fc, 3, 10*time.Second), tooMany: map[int64]int{}}
		g := &gatedBase{base: srv, hold: metered}
		tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
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

// resourceServer is a GitHub-style API: /search draws from the "search"
// resource, anything else from "core", each announced in
// X-RateLimit-Limit, -Remaining, -Reset (seconds) and -Resource, one
// window of an hour for the test.
type resourceServer struct {
	mu      sync.Mutex
	left    map[string]int
	tooMany map[string]int
}

func (s *resourceServer) RoundTrip(req *http.Request) (*http.Response, error) {
	res := "core"
	if req.URL.Path == "/search" {
		res = "search"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	status := 200
	if s.left[res] == 0 {
		status = 429
		s.tooMany[res]++
	} else {
		s.left[res]--
	}
	resp := response(req, status, "")
	resp.Header.Set("X-RateLimit-Limit", "100")
	resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(s.left[res]))
	resp.Header.Set("X-RateLimit-Reset", "3600")
	resp.Header.Set("X-RateLimit-Resource", res)
	return resp, nil
}

// TestQuotaSpentResourceGetsOne429PerWindow: GitHub's two resources, named
// by X-RateLimit-Resource: a process that made one search and then spent
// "core" has its core requests refused locally while "search" has requests
// left. A 429 that names its resource says which quota the next core
// request draws from, as well as the retry's: one 429 per quota window.
func TestQuotaSpentResourceGetsOne429PerWindow(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &resourceServer{left: map[string]int{"core": 3, "search": 30}, tooMany: map[string]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	call := func(path string) error { return get(t, tr, "https://api.test"+path) }
	call("/search")
	refused := 0
	for range 13 {
		fc.Advance(time.Second)
		if err := call("/repos"); errors.Is(err, throttle.ErrThrottled) {
			refused++
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := srv.tooMany["core"]; n > 1 {
		t.Errorf("core spent (X-RateLimit-Remaining: 0 on a 429 naming it) while search has 29 left: %d 429s for core in one window, %d of 13 core operations refused locally; want at most 1 429 (README: a process gets at most one 429 per quota window)", n, refused)
	}
}

// TestQuotaRouteOfASpentQuotaOutlivesIDRoutes: GitHub-style resources,
// "search" spent (a 429 naming it, X-RateLimit-Remaining: 0, an hour to
// the reset), "core" with plenty left. The API puts object IDs in the
// first path segment (GET /4711, as gist-like APIs do): 32 calls to
// distinct IDs, one a second, each a route of its own drawing from core,
// do not evict the route that draws from the spent quota, GET /search, and
// the next search is refused locally: a request on a route known to draw
// from a spent quota is refused until that quota's group resets.
func TestQuotaRouteOfASpentQuotaOutlivesIDRoutes(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &resourceServer{left: map[string]int{"core": 1000, "search": 0}, tooMany: map[string]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
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
		t.Errorf("search spent for an hour, then %d core calls to /<id> routes: GET /search sent again (err %v), %d 429s for search in one window; want at most 1 (at most one 429 per quota window per process; docs/overload.md: a request on a route known to draw from a spent quota is refused until that quota's group resets)", quotaRoutes, err, n)
	}
}

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

// TestQuotaUnmeteredRoutesDoNotSpendTheMeteredQuota: one caller, one
// request at a time (nothing in flight when a response is read), to an API
// whose gateway meters 1 route in 20. The metered route's 200s say 90 and
// more remain, and the responses without fields end their request's count
// in flight, so the count follows the server's: a healthy server with
// quota left is never refused.
func TestQuotaUnmeteredRoutesDoNotSpendTheMeteredQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &meteredRouteServer{fixedWindow: newFixedWindow(fc, 100, time.Hour), sendLimit: true, tooMany: map[int64]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
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
