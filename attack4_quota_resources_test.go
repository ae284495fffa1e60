package httpretry

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// resourceServer is a GitHub-style API: /search draws from the "search"
// resource, anything else from "core", each announced in
// X-RateLimit-Limit, -Remaining, -Reset (seconds) and -Resource, one
// window of an hour for the test.
type resourceServer struct {
	mu      sync.Mutex
	left    map[string]int
	tooMany map[string]int
}

func (s *resourceServer) RoundTrip(req *http.Request) (*http.Response, error) {
	res := "core"
	if req.URL.Path == "/search" {
		res = "search"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	status := 200
	if s.left[res] == 0 {
		status = 429
		s.tooMany[res]++
	} else {
		s.left[res]--
	}
	resp := response(req, status, "")
	resp.Header.Set("X-RateLimit-Limit", "100")
	resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(s.left[res]))
	resp.Header.Set("X-RateLimit-Reset", "3600")
	resp.Header.Set("X-RateLimit-Resource", res)
	return resp, nil
}

// TestAttack4QuotaSpentResourceGetsOne429PerWindow: issue 23 asks for
// "at most one 429 per quota window per process", and the README says
// "a process gets at most one 429 per quota window". With GitHub's two
// resources, docs/overload.md's own example, a process that made one
// search and then spent "core" keeps sending every core request while
// "search" has requests left: each meets a 429, 10 in the window here,
// since a request is refused only when every group has a spent quota.
// A 429 that names its resource (X-RateLimit-Resource: core) says which
// quota the next core request would draw from as well as the retry's.
func TestAttack4QuotaSpentResourceGetsOne429PerWindow(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &resourceServer{left: map[string]int{"core": 3, "search": 30}, tooMany: map[string]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	call := func(path string) error { return get(t, tr, "https://api.test"+path) }
	call("/search")
	refused := 0
	for range 13 {
		fc.Advance(time.Second)
		if err := call("/repos"); errors.Is(err, throttle.ErrThrottled) {
			refused++
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := srv.tooMany["core"]; n > 1 {
		t.Errorf("core spent (X-RateLimit-Remaining: 0 on a 429 naming it) while search has 29 left: %d 429s for core in one window, %d of 13 core operations refused locally; want at most 1 429 (README: a process gets at most one 429 per quota window)", n, refused)
	}
}
