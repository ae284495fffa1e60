package promretry

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Defaults and limits of the route label.
const (
	// DefaultMaxRoutes is the number of distinct route values a Collector
	// keeps when Options.MaxRoutes is 0.
	DefaultMaxRoutes = 100
	// OtherRoute is the route value of every request whose route is not
	// kept: beyond MaxRoutes, empty, longer than MaxRouteLen bytes or not
	// valid UTF-8.
	OtherRoute = "other"
	// MaxRouteLen is the longest route value kept, in bytes.
	MaxRouteLen = 128
)

// hostRoute is the default route function: the request's host (and
// port), never its path or query.
func hostRoute(req *http.Request) string {
	if req.URL != nil && req.URL.Host != "" {
		return req.URL.Host
	}
	return req.Host
}

// routeTable maps route values to their metrics. Reads take no lock and
// allocate nothing: they load an immutable map. Adding a route copies the
// map under mu, which happens at most a few hundred times in a process's
// life.
type routeTable struct {
	max      int                        // distinct routes kept, OtherRoute aside
	newRoute func(string) *routeMetrics // creates a route's metrics

	m atomic.Pointer[map[string]*routeMetrics] // replaced, never modified

	mu      sync.Mutex // protects kept and aliases, and serializes writers of m
	kept    int        // routes in m with their own metrics
	aliases int        // names in m that map to the OtherRoute metrics
}

// aliasesPerRoute × max bounds how many overflowing route names the table remembers
// as OtherRoute, so that repeated ones avoid the lock. Names beyond it
// still map to OtherRoute, under the lock.
const aliasesPerRoute = 4

func newRouteTable(max int, newRoute func(string) *routeMetrics) *routeTable {
	t := &routeTable{max: max, newRoute: newRoute}
	m := make(map[string]*routeMetrics)
	t.m.Store(&m)
	return t
}

// get returns the metrics of route name, creating them on first use.
func (t *routeTable) get(name string) *routeMetrics {
	if r, ok := (*t.m.Load())[name]; ok {
		return r
	}
	return t.add(name)
}

// add is get's slow path: the name is not in the map yet.
func (t *routeTable) add(name string) *routeMetrics {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := *t.m.Load()
	if r, ok := m[name]; ok {
		return r
	}
	valid := name != "" && len(name) <= MaxRouteLen && utf8.ValidString(name)
	if valid && t.kept < t.max {
		r := t.newRoute(strings.Clone(name))
		t.kept++
		t.store(m, name, r)
		return r
	}
	other, ok := m[OtherRoute]
	if !ok {
		other = t.newRoute(OtherRoute)
		t.store(m, OtherRoute, other)
		m = *t.m.Load()
	}
	if valid && t.aliases < aliasesPerRoute*t.max {
		t.aliases++
		t.store(m, name, other)
	}
	return other
}

// store publishes a copy of m with name added. t.mu must be held.
func (t *routeTable) store(m map[string]*routeMetrics, name string, r *routeMetrics) {
	next := make(map[string]*routeMetrics, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[strings.Clone(name)] = r
	t.m.Store(&next)
}
