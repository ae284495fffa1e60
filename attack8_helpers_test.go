package httpretry

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// attack8Server meters a quota of limit requests per window of win from
// t0 (fake clock), announcing the reset in whole seconds rounded up, and
// counts the 429s it sends per window. "/slow" is counted when count is
// closed and answered when release is closed; "/fail" fails uncounted.
type attack8Server struct {
	fc      *clockwork.FakeClock
	t0      time.Time
	win     time.Duration
	limit   int
	mu      sync.Mutex
	used    map[int64]int
	tooMany map[int64]int

	arrived, count, counted, release chan struct{}
}

func newAttack8Server(fc *clockwork.FakeClock, win time.Duration, limit int) *attack8Server {
	return &attack8Server{fc: fc, t0: fc.Now(), win: win, limit: limit, used: map[int64]int{}, tooMany: map[int64]int{},
		arrived: make(chan struct{}), count: make(chan struct{}), counted: make(chan struct{}), release: make(chan struct{})}
}

func (s *attack8Server) window() int64 { return int64(s.fc.Since(s.t0) / s.win) }

func (s *attack8Server) countNow(resp *http.Response) {
	el := s.fc.Since(s.t0)
	w := int64(el / s.win)
	s.mu.Lock()
	s.used[w]++
	left := s.limit - s.used[w]
	if left < 0 {
		left = 0
		resp.StatusCode = http.StatusTooManyRequests
		s.tooMany[w]++
	}
	s.mu.Unlock()
	reset := int((s.win - el%s.win + time.Second - 1) / time.Second)
	resp.Header.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(left))
	resp.Header.Set("X-RateLimit-Reset", strconv.Itoa(reset))
}

func (s *attack8Server) spendOther(n int) {
	w := s.window()
	s.mu.Lock()
	s.used[w] += n
	s.mu.Unlock()
}

func (s *attack8Server) leftIn(w int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.limit-s.used[w], 0)
}

func (s *attack8Server) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.URL.Path {
	case "/fail":
		return nil, errors.New("attack8: connection reset by peer")
	case "/slow":
		resp := response(req, 200, "ok")
		close(s.arrived)
		<-s.count
		s.countNow(resp)
		close(s.counted)
		<-s.release
		return resp, nil
	}
	resp := response(req, 200, "ok")
	s.countNow(resp)
	return resp, nil
}

func attack8Wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}
