package httpretry

import (
	"errors"
	"testing"

	"github.com/httpretry/httpretry/throttle"
)

// TestQuotaRouteRefusesOnlyTheSpentQuotasRoutes: with GitHub's core and
// search quotas held and core spent, a request on a route whose
// responses named core is refused; one on the search route, or on a
// route not seen yet, is sent, since search has requests left.
func TestQuotaRouteRefusesOnlyTheSpentQuotasRoutes(t *testing.T) {
	t.Parallel()
	srv := &resourceServer{left: map[string]int{"core": 1, "search": 30}, tooMany: map[string]int{}}
	tr := &Transport{Base: srv, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
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
