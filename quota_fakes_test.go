package httpretry

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/throttleseam"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// fixedWindow is a server's count of a quota of limit requests per
// window, windows starting at zero on clock, as the fake servers of the
// quota tests keep it. Its user holds a lock around it.
type fixedWindow struct {
	clock  clockwork.Clock
	zero   time.Time
	limit  int
	window time.Duration

	current int64 // the window's number
	used    int   // requests admitted in it
}

func newFixedWindow(clock clockwork.Clock, limit int, window time.Duration) fixedWindow {
	return fixedWindow{clock: clock, zero: clock.Now(), limit: limit, window: window}
}

// take counts a request arriving now. It returns the number of its
// window, whether the quota admitted it, what the window still admits,
// and the seconds to the window's end, rounded up, as servers announce
// a reset.
func (w *fixedWindow) take() (n int64, admitted bool, left int, reset int64) {
	elapsed := w.clock.Since(w.zero)
	n = int64(elapsed / w.window)
	if n != w.current {
		w.current, w.used = n, 0
	}
	admitted = w.used < w.limit
	if admitted {
		w.used++
	}
	rest := w.window*time.Duration(n+1) - elapsed
	return n, admitted, w.limit - w.used, int64((rest + time.Second - 1) / time.Second)
}

// remaining is what the window now running still admits.
func (w *fixedWindow) remaining() int {
	if int64(w.clock.Since(w.zero)/w.window) != w.current {
		return w.limit
	}
	return w.limit - w.used
}

// gatedBase holds requests at a gate, when one is set, before base
// answers them; hold, when set, chooses the requests it holds.
type gatedBase struct {
	base http.RoundTripper
	hold func(*http.Request) bool

	mu      sync.Mutex
	entered int // requests held since the gate was set
	gate    chan struct{}
}

func (g *gatedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	gate := g.gate
	if gate != nil && g.hold != nil && !g.hold(req) {
		gate = nil
	}
	if gate != nil {
		g.entered++
	}
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.base.RoundTrip(req)
}

// burst sets a gate and runs n calls at once. Once each has reached the
// gate or been refused with ErrThrottled (a poll, not a timing
// assumption; 5 s at most), it opens the gate, waits for the calls, and
// returns how many were refused.
func (g *gatedBase) burst(n int, call func() error) int {
	g.mu.Lock()
	g.gate, g.entered = make(chan struct{}), 0
	g.mu.Unlock()
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if errors.Is(call(), throttle.ErrThrottled) {
				refused.Add(1)
			}
		})
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		g.mu.Lock()
		entered := g.entered
		g.mu.Unlock()
		if entered+int(refused.Load()) >= n {
			break
		}
	}
	g.mu.Lock()
	close(g.gate)
	g.mu.Unlock()
	wg.Wait()
	return int(refused.Load())
}

// slowQuotaServer meters a quota of limit requests per window of win
// from t0 (fake clock), announced in X-RateLimit-Limit, -Remaining and
// -Reset (seconds, rounded up), and counts the 429s it sends per window.
// "/slow" is counted when count is closed and answered when release is
// closed; "/fail" fails uncounted.
type slowQuotaServer struct {
	fc      *clockwork.FakeClock
	t0      time.Time
	win     time.Duration
	limit   int
	mu      sync.Mutex
	used    map[int64]int
	tooMany map[int64]int

	arrived, count, counted, release chan struct{}
}

func newSlowQuotaServer(fc *clockwork.FakeClock, win time.Duration, limit int) *slowQuotaServer {
	return &slowQuotaServer{fc: fc, t0: fc.Now(), win: win, limit: limit, used: map[int64]int{}, tooMany: map[int64]int{},
		arrived: make(chan struct{}), count: make(chan struct{}), counted: make(chan struct{}), release: make(chan struct{})}
}

func (s *slowQuotaServer) window() int64 { return int64(s.fc.Since(s.t0) / s.win) }

// countNow counts one request at the fake clock's time and writes the
// quota fields to resp; the status is 429 when the window was spent.
func (s *slowQuotaServer) countNow(resp *http.Response) {
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

// spendOther lets another process spend n of the current window.
func (s *slowQuotaServer) spendOther(n int) {
	w := s.window()
	s.mu.Lock()
	s.used[w] += n
	s.mu.Unlock()
}

func (s *slowQuotaServer) leftIn(w int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.limit-s.used[w], 0)
}

func (s *slowQuotaServer) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.URL.Path {
	case "/fail":
		return nil, errors.New("slowQuotaServer: connection reset by peer")
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

// waitClosed waits for ch to be closed, for 5 s at most.
func waitClosed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// admitAll is a Throttle's draw that never refuses: the throttle's draw
// stays out of tests of the quota's pacing.
func admitAll() float64 { return 0.999 }

// drawing makes th draw the number of each decision that may refuse from
// draw (see throttleseam.SetDraw), and returns th.
func drawing(th *throttle.Throttle, draw func() float64) *throttle.Throttle {
	throttleseam.SetDraw(th, draw)
	return th
}

// throttleCounts returns the requests and accepts th counted for the
// destination key names (see throttleseam.Counts).
func throttleCounts(th *throttle.Throttle, key string) (requests, accepts float64) {
	return throttleseam.Counts(th, key)
}

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
