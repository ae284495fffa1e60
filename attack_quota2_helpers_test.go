package httpretry

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// admitAll is a Throttle's Rand that never refuses: the throttle's draw
// stays out of tests of the quota's pacing.
func admitAll() float64 { return 0.999 }

// pacedServer is a Base with a quota of limit requests per window,
// windows starting at the clock's zero, announced in RateLimit and
// RateLimit-Policy, the reset in seconds rounded up; past the quota it
// answers 429. answer, when set, may replace a request's answer: a
// status it returns is counted against the quota and carries the quota's
// headers; an error it returns never reached the server and is not
// counted.
type pacedServer struct {
	answer func(req *http.Request, hit int) (status int, err error)

	mu sync.Mutex
	fixedWindow
	hits    int           // requests taken, errors included
	tooMany map[int64]int // 429s per window
	served  map[int64]int // requests counted per window
}

func newPacedServer(fc clockwork.Clock, limit int, window time.Duration) *pacedServer {
	return &pacedServer{fixedWindow: newFixedWindow(fc, limit, window),
		tooMany: map[int64]int{}, served: map[int64]int{}}
}

func (s *pacedServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.hits++
	hit := s.hits
	s.mu.Unlock()
	status := 200
	if s.answer != nil {
		// Outside the lock: an answer may hold its request.
		st, err := s.answer(req, hit)
		if err != nil {
			return nil, err
		}
		if st != 0 {
			status = st
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, admitted, left, reset := s.take()
	s.served[n]++
	if !admitted {
		status = 429
		s.tooMany[n]++
	}
	h := http.Header{
		"Ratelimit-Policy": {fmt.Sprintf(`"default";q=%d;w=%d`, s.limit, s.window/time.Second)},
		"Ratelimit":        {fmt.Sprintf(`"default";r=%d;t=%d`, left, reset)},
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// Hits is how many requests the server has taken.
func (s *pacedServer) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// left is what the server's current window still admits.
func (s *pacedServer) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remaining()
}
