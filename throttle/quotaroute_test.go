package throttle

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
)

// TestRouteKeys: a route is a request's method and the first two
// segments of its URL path (narrow), or its first segment alone (wide).
func TestRouteKeys(t *testing.T) {
	t.Parallel()
	req := func(method, path string) *http.Request {
		return &http.Request{Method: method, URL: &url.URL{Path: path}}
	}
	for _, tt := range []struct {
		name                 string
		a, b                 *http.Request
		sameWide, sameNarrow bool
	}{
		{"two resources under one segment", req("GET", "/search/code"), req("GET", "/search/issues"), true, false},
		{"deeper paths of two segments", req("GET", "/search/code/x"), req("GET", "/search/code"), true, true},
		{"the segment alone", req("GET", "/search"), req("GET", "/search/code"), true, false},
		{"no method is GET", req("", "/search"), req("GET", "/search"), true, true},
		{"another method", req("POST", "/search"), req("GET", "/search"), false, false},
		{"another segment", req("GET", "/repos/a/b"), req("GET", "/search"), false, false},
		{"the root and a segment", req("GET", "/"), req("GET", "/search"), false, false},
		{"a prefix of a segment", req("GET", "/sea"), req("GET", "/search"), false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			aw, an := routeKeys(tt.a)
			bw, bn := routeKeys(tt.b)
			if (aw == bw) != tt.sameWide || (an == bn) != tt.sameNarrow {
				t.Errorf("%s %s and %s %s: same wide %v, narrow %v; want %v, %v", tt.a.Method, tt.a.URL.Path, tt.b.Method, tt.b.URL.Path,
					aw == bw, an == bn, tt.sameWide, tt.sameNarrow)
			}
		})
	}
}

// TestQuotaRouteTableKeepsTheNewest: a route's quota is the last one
// named; past quotaRoutes, the oldest route is forgotten.
func TestQuotaRouteTableKeepsTheNewest(t *testing.T) {
	t.Parallel()
	var tab quotaRouteTable
	tab.remember(1, "core", func(string) bool { return false })
	tab.remember(1, "search", func(string) bool { return false })
	if name, ok := tab.lookup(1); !ok || name != "search" {
		t.Errorf("route 1: %q, %v; want search, the last named", name, ok)
	}
	for k := range quotaRoutes {
		tab.remember(uint64(k+2), "r"+strconv.Itoa(k), func(string) bool { return false })
	}
	if _, ok := tab.lookup(1); ok {
		t.Errorf("route 1 kept after %d newer routes; want it forgotten", quotaRoutes)
	}
	for k := range quotaRoutes {
		if name, ok := tab.lookup(uint64(k + 2)); !ok || name != "r"+strconv.Itoa(k) {
			t.Errorf("route %d: %q, %v; want r%d", k+2, name, ok, k)
		}
	}
}

// TestQuotaRouteTableKeepsTheRoutesOfASpentQuota: a new route takes the
// place of the oldest whose quota is not spent, so routes that come and
// go do not push out the route of a spent quota, which is the one that
// refuses requests; with every quota spent, the oldest goes.
func TestQuotaRouteTableKeepsTheRoutesOfASpentQuota(t *testing.T) {
	t.Parallel()
	var tab quotaRouteTable
	spent := func(name string) bool { return name == "search" }
	tab.remember(1, "search", spent)
	for k := range 3 * quotaRoutes {
		tab.remember(uint64(k+2), "core", spent)
	}
	if name, ok := tab.lookup(1); !ok || name != "search" {
		t.Errorf("the spent quota's route after %d routes of another: %q, %v; want search, kept", 3*quotaRoutes, name, ok)
	}
	all := func(string) bool { return true }
	for k := range quotaRoutes {
		tab.remember(uint64(1000+k), "core", all)
	}
	if _, ok := tab.lookup(1); ok {
		t.Errorf("route 1 kept after %d newer routes, every quota spent; want the oldest forgotten", quotaRoutes)
	}
}
