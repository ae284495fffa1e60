package metricsutil

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func TestRouteTableValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, route, want string
		overflowed        bool
	}{
		{"template", "/books/{id}", "/books/{id}", false},
		{"empty", "", OtherRoute, false},
		{"longest kept", strings.Repeat("a", MaxRouteLen), strings.Repeat("a", MaxRouteLen), false},
		{"too long", strings.Repeat("a", MaxRouteLen+1), OtherRoute, false},
		{"invalid UTF-8", "/books/\xff", OtherRoute, false},
		{"the other route itself", OtherRoute, OtherRoute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRouteTable(0, func(r string) string { return r })
			if got, over := rt.Get(tt.route); got != tt.want || over != tt.overflowed {
				t.Errorf("Get(%q) = %q, %v; want %q, %v", tt.route, got, over, tt.want, tt.overflowed)
			}
		})
	}
}

// TestRouteTableCap: the first max names keep their own value; later
// ones are other and reported as overflowing, remembered up to a bound,
// after which no new name takes the lock.
func TestRouteTableCap(t *testing.T) {
	t.Parallel()
	built := 0
	rt := NewRouteTable(3, func(r string) string { built++; return r })
	var got []string
	var overflows int
	for i := range 6 {
		v, over := rt.Get(fmt.Sprintf("/r%d", i))
		got = append(got, v)
		if over {
			overflows++
		}
	}
	if want := "/r0 /r1 /r2 other other other"; strings.Join(got, " ") != want {
		t.Errorf("routes %q; want %q", strings.Join(got, " "), want)
	}
	if overflows != 3 || built != 4 {
		// Other is built on first use, with the fourth name.
		t.Errorf("%d overflows, %d values built; want 3 and 4 (three routes and other)", overflows, built)
	}
	// Fill the aliases (4 × 3 = 12): the table stops growing and is full.
	for i := range 40 {
		rt.Get(fmt.Sprintf("/more%d", i))
	}
	if n := len(*rt.m.Load()); n != 3+12 {
		t.Errorf("%d names remembered; want 15 (3 routes, 12 aliases)", n)
	}
	if !rt.full.Load() {
		t.Error("the table is not marked full past its aliases")
	}
	if v, over := rt.Get("/yet-another"); v != OtherRoute || !over {
		t.Errorf("a name past the cap = %q, %v; want other, overflowing", v, over)
	}
	if v, over := rt.Get("/r1"); v != "/r1" || over {
		t.Errorf("a kept name = %q, %v; want itself", v, over)
	}
}

func TestRouteTableConcurrent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	builds := map[string]int{}
	rt := NewRouteTable(5, func(r string) string {
		mu.Lock()
		defer mu.Unlock()
		builds[r]++
		return r
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				rt.Get(fmt.Sprintf("/r%d", (g+i)%50))
			}
		})
	}
	wg.Wait()
	kept := 0
	for r, n := range builds {
		if n != 1 {
			t.Errorf("route %q built %d times; want once", r, n)
		}
		if r != OtherRoute {
			kept++
		}
	}
	if kept != 5 {
		t.Errorf("%d routes kept; want 5", kept)
	}
}

func TestRouteTableLookupAllocatesNothing(t *testing.T) {
	rt := NewRouteTable(2, func(r string) string { return r })
	rt.Get("/a")
	rt.Get("/b")
	rt.Get("/c") // overflows, remembered
	if n := testing.AllocsPerRun(100, func() {
		rt.Get("/a")
		rt.Get("/c")
		rt.Get("")
	}); n != 0 {
		t.Errorf("%v allocations per lookup; want 0", n)
	}
}

// TestRouteNameIsCopied: a route name sharing memory with a buffer the
// caller reuses is copied before it is kept.
func TestRouteNameIsCopied(t *testing.T) {
	t.Parallel()
	rt := NewRouteTable(0, func(r string) string { return r })
	buf := []byte("/books/{id}")
	name, _ := rt.Get(unsafe.String(&buf[0], len(buf)))
	copy(buf, "/XXXXXXXXXX")
	if name != "/books/{id}" {
		t.Errorf("kept name changed to %q", name)
	}
	if got, _ := rt.Get("/books/{id}"); got != "/books/{id}" {
		t.Errorf("lookup after the buffer changed: %q", got)
	}
}

func TestOtherBuiltOnFirstUse(t *testing.T) {
	t.Parallel()
	var built []string
	rt := NewRouteTable(1, func(r string) string { built = append(built, r); return r })
	rt.Get("/a")
	if fmt.Sprint(built) != "[/a]" {
		t.Fatalf("built %v before any overflow; want [/a]", built)
	}
	rt.Get("")
	rt.Get("/b")
	if fmt.Sprint(built) != "[/a other]" {
		t.Errorf("built %v; want [/a other], other once", built)
	}
}

func TestHostRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		req  *http.Request
		want string
	}{
		{httptest.NewRequest("GET", "http://user:pw@api.test:8443/books/1?key=s3", nil), "api.test:8443"},
		{&http.Request{Host: "host.only"}, "host.only"},
	}
	for _, tt := range tests {
		if got := HostRoute(tt.req); got != tt.want {
			t.Errorf("HostRoute = %q; want %q", got, tt.want)
		}
	}
}
