package otelretry

import (
	"net/http"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// DefaultMaxRoutes is the number of distinct route values an adapter
// reports when Options.MaxRoutes is 0.
const DefaultMaxRoutes = 100

// maxRouteLen is the longest route value kept; a longer one is most
// likely a raw path or a mistake, and becomes "other".
const maxRouteLen = 128

// otherRoute is the route value of every request past the cap, and of
// values that are empty, too long or not valid UTF-8.
const otherRoute = "other"

// routeTable maps route names to per-route values of type V, admitting at
// most max distinct names; every later name shares the "other" entry. It
// is safe for concurrent use, and a lookup of a known name neither locks
// nor allocates: readers load an immutable map that writers replace.
type routeTable[V any] struct {
	max   int
	build func(route string) V

	known atomic.Pointer[map[string]V]

	mu    sync.Mutex // serialises writers of known
	other V
}

func newRouteTable[V any](max int, build func(route string) V) *routeTable[V] {
	t := &routeTable[V]{max: max, build: build, other: build(otherRoute)}
	empty := map[string]V{}
	t.known.Store(&empty)
	return t
}

// get returns the value of route, creating it if the cap allows.
func (t *routeTable[V]) get(route string) V {
	if v, ok := (*t.known.Load())[route]; ok {
		return v
	}
	if route == "" || route == otherRoute || len(route) > maxRouteLen || !utf8.ValidString(route) {
		return t.other
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.known.Load()
	if v, ok := old[route]; ok {
		return v
	}
	if len(old) >= t.max {
		return t.other
	}
	// Copy on write: at most max copies of at most max entries, once,
	// in exchange for lock-free reads on every request after.
	next := make(map[string]V, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	v := t.build(route)
	next[route] = v
	t.known.Store(&next)
	return v
}

// routeOf returns the route name of req: route(req) when route is set,
// else the request's host (host[:port], never userinfo).
func routeOf(req *http.Request, route func(*http.Request) string) string {
	if route != nil {
		return route(req)
	}
	if req.URL != nil && req.URL.Host != "" {
		return req.URL.Host
	}
	return req.Host
}
