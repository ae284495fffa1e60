package promretry

import (
	"fmt"
	"github.com/httpretry/httpretry"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestRouteValues(t *testing.T) {
	tests := []struct {
		name  string
		route string
		want  string
	}{
		{"template", "/books/{id}", "/books/{id}"},
		{"empty", "", OtherRoute},
		{"longest kept", strings.Repeat("a", MaxRouteLen), strings.Repeat("a", MaxRouteLen)},
		{"too long", strings.Repeat("a", MaxRouteLen+1), OtherRoute},
		{"invalid UTF-8", "/books/\xff", OtherRoute},
		{"the other route itself", OtherRoute, OtherRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newCollector(t, Options{})
			if got, _ := c.routes.Get(tt.route); got.name != tt.want {
				t.Errorf("route %q reported as %q; want %q", tt.route, got.name, tt.want)
			}
		})
	}
}

// TestRouteOverflowsCounted: operations of routes past MaxRoutes count
// under "other" and in httpretry_route_overflows_total; an empty or
// overlong route counts under "other" but is no overflow of the cap.
func TestRouteOverflowsCounted(t *testing.T) {
	c, reg := newCollector(t, Options{MaxRoutes: 2, Route: func(r *http.Request) string { return r.URL.Path }})
	ok := httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200}
	for _, path := range []string{"/a", "/b", "/c", "/d", "/c", "/a", "/" + strings.Repeat("x", MaxRouteLen)} {
		c.OnDone(httptest.NewRequest("GET", "http://api.test"+path, nil), ok)
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_route_overflows_total", map[string]float64{`httpretry_route_overflows_total`: 3})
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="/a"}`:    2,
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="/b"}`:    1,
		`httpretry_operations_total{method="GET",outcome="success",reason="final",route="other"}`: 4,
	})
}

func TestRoutesConcurrently(t *testing.T) {
	c, _ := newCollector(t, Options{MaxRoutes: 10})
	var wg sync.WaitGroup
	names := make([]map[string]bool, 8)
	for g := range names {
		names[g] = make(map[string]bool)
		wg.Go(func() {
			for i := range 1000 {
				r, _ := c.routes.Get(fmt.Sprintf("/r%d", (i*7+g)%50))
				names[g][r.name] = true
			}
		})
	}
	wg.Wait()
	all := make(map[string]bool)
	for _, m := range names {
		for k := range m {
			all[k] = true
		}
	}
	if len(all) != 11 || !all[OtherRoute] {
		t.Errorf("%d distinct route values: %v; want 10 and other", len(all), all)
	}
}
