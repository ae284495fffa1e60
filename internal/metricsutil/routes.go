package metricsutil

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Defaults and limits of the route label.
const (
	// DefaultMaxRoutes is the number of distinct route values an adapter
	// keeps when its MaxRoutes option is 0.
	DefaultMaxRoutes = 100
	// OtherRoute is the route value of every request whose route is not
	// kept: beyond the cap, empty, longer than MaxRouteLen bytes or not
	// valid UTF-8.
	OtherRoute = "other"
	// MaxRouteLen is the longest route value kept, in bytes; a longer one
	// is most likely a raw path or a mistake.
	MaxRouteLen = 128
)

// HostRoute is the default route function: the request's host (and
// port), never its userinfo, path or query.
func HostRoute(req *http.Request) string {
	if req.URL != nil && req.URL.Host != "" {
		// URL.Host never holds userinfo; that is in URL.User.
		return req.URL.Host
	}
	return req.Host
}

// ValidRoute reports whether name may be a route value of its own: not
// empty, not OtherRoute, at most MaxRouteLen bytes, valid UTF-8.
func ValidRoute(name string) bool {
	return name != "" && name != OtherRoute && len(name) <= MaxRouteLen && utf8.ValidString(name)
}

// aliasesPerRoute × max bounds how many overflowing route names a table
// remembers as OtherRoute, so that repeated ones are found without the
// lock. Once that many are remembered, every new name is OtherRoute
// without the lock either.
const aliasesPerRoute = 4

// RouteTable maps route names to per-route values of type V, keeping at
// most max distinct names; every other name, and every name ValidRoute
// refuses, shares the OtherRoute value. A lookup of a name seen before
// neither locks nor allocates: readers load an immutable map that
// writers replace. Only the first max names and a bounded number of
// overflowing ones ever take the lock, so a flood of new names past the
// cap does not serialise callers.
//
// A RouteTable is safe for concurrent use by multiple goroutines.
type RouteTable[V any] struct {
	max   int
	build func(route string) V

	otherOnce sync.Once // builds other on first use, so that it shows only once used
	other     V

	m    atomic.Pointer[map[string]routeEntry[V]] // replaced, never modified
	full atomic.Bool                              // no name will be added any more

	mu      sync.Mutex // protects kept and aliases, and serialises writers of m
	kept    int        // names in m with their own value
	aliases int        // names in m that map to other
}

type routeEntry[V any] struct {
	v        V
	overflow bool // the name maps to other because of the cap
}

// NewRouteTable returns a table keeping at most max names (0 or less
// means DefaultMaxRoutes), which builds each name's value with build,
// once, on its first use; the OtherRoute value too.
func NewRouteTable[V any](max int, build func(route string) V) *RouteTable[V] {
	if max <= 0 {
		max = DefaultMaxRoutes
	}
	t := &RouteTable[V]{max: max, build: build}
	m := make(map[string]routeEntry[V])
	t.m.Store(&m)
	return t
}

// Get returns the value of route name, creating it if the cap allows,
// and whether the name overflowed: it was valid but the cap had been
// reached, so its requests are counted under OtherRoute.
func (t *RouteTable[V]) Get(name string) (v V, overflowed bool) {
	if e, ok := (*t.m.Load())[name]; ok {
		return e.v, e.overflow
	}
	if !ValidRoute(name) {
		return t.otherValue(), false
	}
	if t.full.Load() {
		return t.otherValue(), true
	}
	return t.add(name)
}

// otherValue returns the OtherRoute value, building it on first use.
func (t *RouteTable[V]) otherValue() V {
	t.otherOnce.Do(func() { t.other = t.build(OtherRoute) })
	return t.other
}

// add is Get's slow path: a valid name not in the map yet.
func (t *RouteTable[V]) add(name string) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := *t.m.Load()
	if e, ok := m[name]; ok {
		return e.v, e.overflow
	}
	if t.kept < t.max {
		t.kept++
		name = strings.Clone(name) // the caller's string may be reused
		v := t.build(name)
		t.store(m, name, routeEntry[V]{v: v})
		return v, false
	}
	other := t.otherValue()
	if t.aliases < aliasesPerRoute*t.max {
		t.aliases++
		t.store(m, strings.Clone(name), routeEntry[V]{v: other, overflow: true})
	} else {
		t.full.Store(true)
	}
	return other, true
}

// store publishes a copy of m with name added. t.mu must be held. At most
// (1 + aliasesPerRoute) × max copies are made, once, in exchange for
// lock-free reads on every request after.
func (t *RouteTable[V]) store(m map[string]routeEntry[V], name string, e routeEntry[V]) {
	next := make(map[string]routeEntry[V], len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[name] = e
	t.m.Store(&next)
}
