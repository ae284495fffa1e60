package promretry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unsafe"
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
			if got := c.routes.get(tt.route).name; got != tt.want {
				t.Errorf("route %q reported as %q; want %q", tt.route, got, tt.want)
			}
		})
	}
}

func TestDefaultRouteIsTheHost(t *testing.T) {
	tests := []struct {
		req  *http.Request
		want string
	}{
		{httptest.NewRequest("GET", "http://user:pw@api.test:8443/books/1?key=s3", nil), "api.test:8443"},
		{&http.Request{Host: "host.only"}, "host.only"},
	}
	for _, tt := range tests {
		if got := hostRoute(tt.req); got != tt.want {
			t.Errorf("hostRoute = %q; want %q", got, tt.want)
		}
	}
}

// TestMaxRoutes checks the cap: the first MaxRoutes distinct values keep
// their own series, every later one is "other", and the names that
// overflowed are remembered only up to a bound.
func TestMaxRoutes(t *testing.T) {
	c, _ := newCollector(t, Options{MaxRoutes: 3})
	var got []string
	for i := range 6 {
		got = append(got, c.routes.get(fmt.Sprintf("/r%d", i)).name)
	}
	if want := "/r0 /r1 /r2 other other other"; strings.Join(got, " ") != want {
		t.Errorf("routes = %v; want %s", got, want)
	}
	// A kept route stays kept; an overflowing one stays other.
	if r := c.routes.get("/r1").name; r != "/r1" {
		t.Errorf("/r1 later reported as %q", r)
	}
	for i := range 100 {
		c.routes.get(fmt.Sprintf("/more%d", i))
	}
	m := *c.routes.m.Load()
	if want := 3 + 1 + aliasesPerRoute*3; len(m) != want {
		t.Errorf("table holds %d names; want %d (3 routes, other, %d aliases)", len(m), want, aliasesPerRoute*3)
	}
	if r := c.routes.get("/more99").name; r != OtherRoute {
		t.Errorf("unremembered overflow reported as %q", r)
	}
}

// TestRouteNameIsCopied checks that a route value that shares memory
// with a buffer its function reuses is copied before it is kept.
func TestRouteNameIsCopied(t *testing.T) {
	c, _ := newCollector(t, Options{})
	buf := []byte("/books/{id}")
	name := c.routes.get(unsafe.String(&buf[0], len(buf))).name
	copy(buf, "/XXXXXXXXXX")
	if name != "/books/{id}" {
		t.Errorf("kept name changed to %q", name)
	}
	if r := c.routes.get("/books/{id}").name; r != "/books/{id}" {
		t.Errorf("lookup after the buffer changed: %q", r)
	}
}

func TestRoutesConcurrently(t *testing.T) {
	c, _ := newCollector(t, Options{MaxRoutes: 10})
	var wg sync.WaitGroup
	names := make([]map[string]bool, 8)
	for g := range names {
		names[g] = make(map[string]bool)
		wg.Go(func() {
			for i := range 1000 {
				names[g][c.routes.get(fmt.Sprintf("/r%d", (i*7+g)%50)).name] = true
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
