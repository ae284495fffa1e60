package otelretry

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestRouteTable(t *testing.T) {
	built := 0
	tbl := newRouteTable(2, func(r string) string { built++; return "v:" + r })
	for _, c := range []struct{ route, want string }{
		{"/a", "v:/a"}, {"/b", "v:/b"}, {"/c", "v:other"}, {"/a", "v:/a"}, {"", "v:other"},
		{strings.Repeat("x", 128), "v:other"}, // the cap is reached: even a valid route is other
		{"other", "v:other"},
	} {
		if got := tbl.get(c.route); got != c.want {
			t.Errorf("get(%.20q) = %q; want %q", c.route, got, c.want)
		}
	}
	if built != 3 {
		t.Errorf("built %d values; want 3 (other, /a, /b)", built)
	}
	long := newRouteTable(5, func(r string) string { return r })
	for _, r := range []string{strings.Repeat("x", 129), "\xff"} {
		if got := long.get(r); got != otherRoute {
			t.Errorf("get(%.20q) = %q; want other", r, got)
		}
	}
	if got := long.get(strings.Repeat("x", 128)); got != strings.Repeat("x", 128) {
		t.Errorf("a 128-byte route became %.20q", got)
	}
}

// TestRouteTableConcurrent: goroutines racing over more routes than the
// cap build each admitted value once and agree on it.
func TestRouteTableConcurrent(t *testing.T) {
	var mu sync.Mutex
	builds := map[string]int{}
	tbl := newRouteTable(10, func(r string) *string {
		mu.Lock()
		builds[r]++
		mu.Unlock()
		return &r
	})
	var wg sync.WaitGroup
	got := make([][]*string, 4)
	for g := range got {
		wg.Go(func() {
			for i := range 40 {
				got[g] = append(got[g], tbl.get(fmt.Sprintf("/r%d", i%20)))
			}
		})
	}
	wg.Wait()
	for r, n := range builds {
		if n != 1 {
			t.Errorf("route %q built %d times", r, n)
		}
	}
	if len(builds) != 11 {
		t.Errorf("%d values built; want 11 (10 routes and other)", len(builds))
	}
	for g := 1; g < len(got); g++ {
		for i := range got[g] {
			if got[g][i] != got[0][i] { // the same value, not only an equal one
				t.Errorf("goroutines disagree on route %d: %q and %q", i%20, *got[0][i], *got[g][i])
			}
		}
	}
}

func TestRouteOf(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://user:pw@api.test:8080/books/1?q=1", nil)
	if got := routeOf(req, nil); got != "api.test:8080" {
		t.Errorf("default route = %q; want the host", got)
	}
	if got := routeOf(req, func(*http.Request) string { return "/books/{id}" }); got != "/books/{id}" {
		t.Errorf("route = %q", got)
	}
	req.URL.Host = ""
	req.Host = "h.test"
	if got := routeOf(req, nil); got != "h.test" {
		t.Errorf("route without URL host = %q; want Request.Host", got)
	}
}
