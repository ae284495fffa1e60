package httpretry

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestQuotaOfOneResourceUnderASharedSegmentDoesNotRefuseTheOther: GitHub
// meters /search/code (resource code_search) and /search/issues (search)
// apart, and the rest of its API as core. Once code_search is spent, a
// /search/code call is refused locally, and a /search/issues call, under
// the same first path segment, is still sent: routes are told apart by
// their first two segments.
func TestQuotaOfOneResourceUnderASharedSegmentDoesNotRefuseTheOther(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	reset := strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		h := w.Header()
		resource, remaining := "core", "4990"
		switch r.URL.Path {
		case "/search/code":
			resource, remaining = "code_search", "0"
		case "/search/issues":
			resource, remaining = "search", "29"
		}
		h.Set("X-Ratelimit-Limit", "30")
		h.Set("X-Ratelimit-Remaining", remaining)
		h.Set("X-Ratelimit-Reset", reset)
		h.Set("X-Ratelimit-Resource", resource)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1,
		Throttle: drawing(&throttle.Throttle{}, func() float64 { return 1 })}}
	get := func(path string) error {
		resp, err := client.Get(srv.URL + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, p := range []string{"/user", "/search/issues", "/search/code"} {
		if err := get(p); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
	}
	before := seen.Load()
	if err := get("/search/code"); !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Errorf("GET /search/code with code_search spent: %v; want ErrQuotaExhausted", err)
	}
	if err := get("/search/issues"); err != nil {
		t.Errorf("GET /search/issues with code_search spent: %v; want it sent", err)
	}
	if n := seen.Load() - before; n != 1 {
		t.Errorf("the server saw %d of the last two calls; want 1, /search/issues", n)
	}
}
