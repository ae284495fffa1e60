package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// xQuotaServer is a Base with a quota of limit requests per window
// (windows from the clock's zero), announced in X-RateLimit-Limit,
// -Remaining and -Reset (seconds, rounded up), as GitHub-style APIs do.
// A request for /plain is answered 404 with no rate-limit headers and is
// not counted, as a route the API gateway does not meter (or a proxy's
// own error page) is.
type xQuotaServer struct {
	fixedWindow
	mu      sync.Mutex
	tooMany map[int64]int
}

func (s *xQuotaServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !metered(req) {
		return response(req, 404, ""), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, admitted, left, reset := s.take()
	status := 200
	if !admitted {
		status = 429
		s.tooMany[n]++
	}
	h := http.Header{
		"X-Ratelimit-Limit":     {strconv.Itoa(s.limit)},
		"X-Ratelimit-Remaining": {strconv.Itoa(left)},
		"X-Ratelimit-Reset":     {strconv.FormatInt(reset, 10)},
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// TestQuotaHeaderlessResponseDoesNotBlindThePacing: one response without
// rate-limit headers (a 404 from a route the gateway does not meter) in
// the first window; in the next window the server answers 200 with
// "X-RateLimit-Remaining: 0". The headers are still read after the
// header-less 404, so the spent quota is learned and the next operation is
// refused locally, not sent to meet a 429.
func TestQuotaHeaderlessResponseDoesNotBlindThePacing(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &xQuotaServer{fixedWindow: newFixedWindow(fc, 3, 10*time.Second), tooMany: map[int64]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	call := func(path string) (int, error) {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test"+path, nil))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Window 0: a metered call, the header-less 404, then until refused.
	call("/a")
	call("/plain")
	for range 4 {
		call("/a")
	}
	fc.Advance(10 * time.Second)
	// Window 1: the server says remaining 2, 1, 0 on three 200s.
	var log []string
	for i := range 4 {
		st, err := call("/a")
		log = append(log, strconv.Itoa(st)+" "+errString(err))
		if i == 3 && !errors.Is(err, throttle.ErrQuotaExhausted) {
			t.Errorf("window 1, after a 200 said X-RateLimit-Remaining: 0: got status %d, err %v; want refused with ErrQuotaExhausted (README: once a response says the quota is spent, new operations are refused until the reset); calls in window 1: %q", st, err, log)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.tooMany[1] > 0 {
		t.Errorf("window 1: %d 429s after the server announced its quota spent; want 0", srv.tooMany[1])
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// metered says whether an xQuotaServer counts req.
func metered(req *http.Request) bool { return req.URL.Path != "/plain" }

// TestQuotaHeaderlessResponsesGetAtMostOne429PerWindow: 6 concurrent
// callers at the start of a window of a quota of 3 whose size and length
// the client learned in the previous window, after a header-less 404: the
// renewed window admits 3 and refuses 3, as without the 404, and the
// server answers at most one 429 in the window.
func TestQuotaHeaderlessResponsesGetAtMostOne429PerWindow(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &xQuotaServer{fixedWindow: newFixedWindow(fc, 3, 10*time.Second), tooMany: map[int64]int{}}
		g := &gatedBase{base: srv, hold: metered}
		tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
		call := func(path string) error { return get(t, tr, "http://api.test"+path) }
		call("/a")
		if plain {
			call("/plain")
		}
		for range 3 {
			call("/a")
		}
		fc.Advance(10 * time.Second)
		g.burst(6, func() error { return call("/a") })
		srv.mu.Lock()
		if n := srv.tooMany[1]; n > 1 {
			t.Errorf("header-less 404 in window 0: %v; window 1: %d 429s from 6 concurrent callers against a quota of 3 the client had learned; want at most 1 (README: a process gets at most one 429 per quota window)", plain, n)
		}
		srv.mu.Unlock()
	}
}

// TestParseRateLimitStringParameterHoldingASemicolon: a policy's
// parameters may include a String (RFC 9651 §3.3.3), which may hold ";".
// Text inside a string is not read as parameters: a note's "r=100" does
// not override the policy's r=0, and the spent quota is read as 0
// remaining.
func TestParseRateLimitStringParameterHoldingASemicolon(t *testing.T) {
	t.Parallel()
	h := http.Header{"Ratelimit": {`"default";r=0;t=30;note="see docs;r=100;"`}}
	rl, ok := throttle.ParseRateLimit(h, time.Unix(1_700_000_000, 0))
	if !ok || rl.Remaining != 0 || rl.Reset != 30*time.Second {
		t.Errorf("ParseRateLimit(%q) = %+v, %v; want Remaining 0, Reset 30s (r=0 and t=30 are the policy's parameters; \"see docs;r=100;\" is a string's content)", h["Ratelimit"][0], rl, ok)
	}
}

// twoPolicyServer announces two policies on every response, as the
// draft's own examples do: a burst of 3 a second and 10 per 100s, both
// counting every request it serves; past either it answers 429.
type twoPolicyServer struct {
	clock clockwork.Clock
	zero  time.Time

	mu        sync.Mutex
	burstWin  int64
	burstUsed int
	dayWin    int64
	dayUsed   int
	tooMany   map[int64]int // 429s per 100s window
	served    int
}

func (s *twoPolicyServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := s.clock.Since(s.zero)
	bw, dw := int64(el/time.Second), int64(el/(100*time.Second))
	if bw != s.burstWin {
		s.burstWin, s.burstUsed = bw, 0
	}
	if dw != s.dayWin {
		s.dayWin, s.dayUsed = dw, 0
	}
	status := 200
	if s.burstUsed >= 3 || s.dayUsed >= 10 {
		status = 429
		s.tooMany[dw]++
	} else {
		s.burstUsed++
		s.dayUsed++
		s.served++
	}
	secs := func(w time.Duration, n int64) int64 {
		return int64((w*time.Duration(n+1) - el + time.Second - 1) / time.Second)
	}
	h := http.Header{
		"Ratelimit-Policy": {`"burst";q=3;w=1, "day";q=10;w=100`},
		"Ratelimit": {`"burst";r=` + strconv.Itoa(3-s.burstUsed) + `;t=` + strconv.FormatInt(secs(time.Second, bw), 10) +
			`, "day";r=` + strconv.Itoa(10-s.dayUsed) + `;t=` + strconv.FormatInt(secs(100*time.Second, dw), 10)},
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// TestQuotaSeveralPoliciesInOneFieldGetAtMostOne429PerWindow: the
// RateLimit field lists two policies that both apply to every request (3 a
// second, 10 per 100s), announced together, so they form one group: an
// operation is refused while either is spent. Once the 100s quota is
// spent, the burst's renewals every second do not let operations through:
// at most one 429 per quota window.
func TestQuotaSeveralPoliciesInOneFieldGetAtMostOne429PerWindow(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &twoPolicyServer{clock: fc, zero: fc.Now(), tooMany: map[int64]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	refused := 0
	for range 200 { // 5 operations a second for 40s, inside the first 100s window
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if errors.Is(err, throttle.ErrQuotaExhausted) {
			refused++
		} else if err == nil {
			resp.Body.Close()
		}
		fc.Advance(200 * time.Millisecond)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := srv.tooMany[0]; n > 1 {
		t.Errorf("RateLimit listing two policies (3/s and 10/100s) on every response: %d 429s in the first 100s window (%d served, %d refused locally); want at most 1 (README: a process gets at most one 429 per quota window)", n, srv.served, refused)
	}
}

// dialectServer is an application that announces its quota in RateLimit
// behind a gateway that answers its own 429s with X-RateLimit-* fields
// (Kong, nginx modules and many API gateways write the X- dialect). The
// quota is shared with other clients: spend empties it from outside.
type dialectServer struct {
	mu      sync.Mutex
	left    int
	tooMany int
}

func (s *dialectServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 {
		s.tooMany++
		resp := response(req, 429, "")
		resp.Header.Set("X-RateLimit-Limit", "100")
		resp.Header.Set("X-RateLimit-Remaining", "0")
		resp.Header.Set("X-RateLimit-Reset", "60")
		return resp, nil
	}
	s.left--
	resp := response(req, 200, "")
	resp.Header.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=60`, s.left))
	resp.Header.Set("RateLimit-Policy", `"default";q=100;w=60`)
	return resp, nil
}

// TestQuotaGatewayDialect429PausesTheDestination: the 200s say RateLimit
// "default" with 20 left; other clients then spend the quota, and the
// gateway answers 429 with "X-RateLimit-Remaining: 0" and a reset of 60s.
// The 429, whatever dialect it speaks, pauses the destination until its
// reset: the operations of the next 10s are refused locally, and the
// process gets one 429 in the window.
func TestQuotaGatewayDialect429PausesTheDestination(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &dialectServer{left: 21}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	call := func() error { return get(t, tr, "http://api.test/") }
	if err := call(); err != nil { // RateLimit: "default";r=20;t=60
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.left = 0 // spent by other clients
	srv.mu.Unlock()
	sent := 0
	for range 10 {
		if err := call(); !errors.Is(err, throttle.ErrThrottled) {
			sent++
		}
		fc.Advance(time.Second)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.tooMany > 1 {
		t.Errorf("a 429 with X-RateLimit-Remaining: 0 and a reset of 60s, after 200s with RateLimit: %d 429s in 10s, %d of 10 operations sent; want 1 (docs/overload.md: once a response says the quota is spent, new operations are refused until the reset; at most one 429 per quota window)", srv.tooMany, sent)
	}
}

// pausingServer announces its quota in RateLimit (plenty left) until
// paused; then, as a secondary limit does (GitHub's abuse limit, a
// gateway's concurrency limit), it answers 429 with only a Retry-After.
type pausingServer struct {
	clock clockwork.Clock

	mu      sync.Mutex
	until   time.Time // the pause's end; zero when not paused
	pause   bool      // the next request starts a pause of 30s
	tooMany int
}

func (s *pausingServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.pause {
		s.pause, s.until = false, now.Add(30*time.Second)
	}
	if now.Before(s.until) {
		s.tooMany++
		resp := response(req, 429, "")
		resp.Header.Set("Retry-After", "30")
		return resp, nil
	}
	resp := response(req, 200, "")
	resp.Header.Set("RateLimit", `"default";r=50;t=60`)
	resp.Header.Set("RateLimit-Policy", `"default";q=100;w=60`)
	return resp, nil
}

// TestQuotaRetryAfterOnlyPausesADestinationWithAKnownQuota: a destination
// that announces its quota in RateLimit answers one 429 with "Retry-After:
// 30" and no rate-limit fields. The 429 spends the quota for the
// Retry-After the server asked, as it does for a destination that sent no
// fields before: the operations of the next 30s are refused locally, and
// the process gets one 429 in the window.
func TestQuotaRetryAfterOnlyPausesADestinationWithAKnownQuota(t *testing.T) {
	t.Parallel()
	for _, known := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		srv := &pausingServer{clock: fc}
		if !known {
			srv.until = fc.Now().Add(30 * time.Second) // 429 from the first request on
		}
		tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
		call := func() error { return get(t, tr, "http://api.test/") }
		if known {
			if err := call(); err != nil { // 200, RateLimit: "default";r=50;t=60
				t.Fatal(err)
			}
			srv.mu.Lock()
			srv.pause = true
			srv.mu.Unlock()
		}
		call() // the 429 with Retry-After: 30
		var errs []string
		for range 5 {
			fc.Advance(time.Second)
			err := call()
			if !errors.Is(err, throttle.ErrThrottled) {
				errs = append(errs, errString(err))
			}
		}
		srv.mu.Lock()
		if srv.tooMany > 1 {
			t.Errorf("quota known from RateLimit before the 429: %v; a 429 with Retry-After: 30, then 5 operations within the 30s: %d 429s in all (operations not refused: %q); want 1 (docs/overload.md: a 429 spends the quota until the Retry-After the server asked; new operations are refused until then; at most one 429 per quota window)", known, srv.tooMany, errs)
		}
		srv.mu.Unlock()
	}
}
