package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// orderedQuotaServer is a Base with a quota of limit requests in one
// window of 60s that does not end during the test (a fake clock), told
// in RateLimit and RateLimit-Policy. It counts a request when it arrives,
// as a server does, and may hold the answer of chosen arrivals: answers
// then reach the client out of the order the server counted them, as on
// an HTTP/2 connection or several HTTP/1.1 ones when handlers take
// different times.
type orderedQuotaServer struct {
	clock clockwork.Clock
	limit int

	mu      sync.Mutex
	arrived int
	used    int
	tooMany int
	hold    map[int]chan struct{} // arrival index -> gate
	release chan struct{}         // when set, every arrival waits for it
}

func (s *orderedQuotaServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	i := s.arrived
	s.arrived++
	status := 200
	if s.used >= s.limit {
		status = 429
		s.tooMany++
	} else {
		s.used++
	}
	left := s.limit - s.used
	gate, all := s.hold[i], s.release
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if all != nil {
		<-all
	}
	resp := response(req, status, "")
	resp.Header.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=60`, left))
	resp.Header.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=60`, s.limit))
	return resp, nil
}

func (s *orderedQuotaServer) counts() (arrived, tooMany int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrived, s.tooMany
}

// TestQuotaStaleAnswerDoesNotRaiseTheCount: within one window the server's
// remaining count only falls. Three operations admitted together (4 in the
// quota, 1 used) are counted by the server as r=2, 1 and 0; the answer r=2
// reaches the client last and does not put requests back into a quota the
// server already said was spent: of two concurrent operations that follow,
// at most one meets a 429 in the window.
func TestQuotaStaleAnswerDoesNotRaiseTheCount(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	gate := make(chan struct{})
	srv := &orderedQuotaServer{clock: fc, limit: 4, hold: map[int]chan struct{}{1: gate}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	call := func() error { return get(t, tr, "http://api.test/") }
	if err := call(); err != nil { // r=3: the quota is known
		t.Fatal(err)
	}
	// Three together: the server counts the first to arrive as r=2 and
	// holds its answer until r=1 and r=0 have reached the client.
	var wg sync.WaitGroup
	done := make(chan error, 3)
	for range 3 {
		wg.Go(func() { done <- call() })
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("before the quota was spent: %v", err)
		}
	}
	close(gate)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The server has said r=0. Two operations together: the server
	// answers once both arrived (or once the client refused one; a poll
	// of 5s at most, not a timing assumption).
	release := make(chan struct{})
	srv.mu.Lock()
	srv.release = release
	before := srv.arrived
	srv.mu.Unlock()
	var refused sync.WaitGroup
	var mu sync.Mutex
	nRefused := 0
	for range 2 {
		refused.Go(func() {
			if err := call(); errors.Is(err, throttle.ErrQuotaExhausted) {
				mu.Lock()
				nRefused++
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		a, _ := srv.counts()
		mu.Lock()
		r := nRefused
		mu.Unlock()
		if a-before+r >= 2 {
			break
		}
	}
	close(release)
	refused.Wait()
	if _, n := srv.counts(); n > 1 {
		t.Errorf("one window: %d 429s after the server answered r=0 and a stale r=2 arrived last; want at most 1 (README: a process gets at most one 429 per quota window; a server's remaining count never rises within a window)", n)
	}
}

// TestQuotaRenewedGuessDoesNotCapTheServersCount: a process starts late in
// an hourly window (others spent 97 of 100; the server sends no Limit
// field) and learns a size of 3. At the reset the window is renewed with
// that guess of 3; the new window's first response says 99 remain, with
// the same reset, and replaces the guess: 10 concurrent callers are then
// sent, not 7 of them refused while the server has 99 left.
func TestQuotaRenewedGuessDoesNotCapTheServersCount(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &meteredRouteServer{fixedWindow: newFixedWindow(fc, 100, time.Hour), tooMany: map[int64]int{}}
	srv.used = 97
	g := &gatedBase{base: srv}
	tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	call := func() error { return get(t, tr, "https://api.test/m") }
	for range 3 {
		call() // 2, 1, 0 remain
	}
	if err := call(); !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Fatalf("quota spent (X-RateLimit-Remaining: 0): err = %v, want ErrQuotaExhausted", err)
	}
	fc.Advance(time.Hour) // the server's new window: 100
	if err := call(); err != nil {
		t.Fatalf("first request of the new window: %v", err)
	}
	srv.mu.Lock()
	said := srv.lastR // 99, same reset as the renewed window
	srv.mu.Unlock()
	const callers = 10
	refused := g.burst(callers, call)
	if refused > 0 {
		t.Errorf("new hourly window, the server's answer (same reset as the renewed window) said %d of 100 remain; then %d concurrent callers: %d refused locally; want none (docs/overload.md: renewed with the most a window was seen to hold, 3 here, \"until responses say more\"; a healthy server with quota left must not be refused: the guess caps the hour at 3 in flight)", said, callers, refused)
	}
}

// TestQuotaLateAnswerOfThePreviousWindowLeavesTheRenewedWindowOpen: a
// quota of 5 per 10 s window announced with X-RateLimit-Remaining / -Reset
// (delta seconds, rounded up). The fifth request of the window is counted
// by the server 0.4 s before the reset and its answer ("0 left, reset in
// 1") is read 0.1 s after it, when the server's new window holds all 5.
// The late answer is the old window's last word, placed from when its
// attempt was sent, not a new window with nothing left: the requests that
// follow are sent.
func TestQuotaLateAnswerOfThePreviousWindowLeavesTheRenewedWindowOpen(t *testing.T) {
	fc := clockwork.NewFakeClock()
	t0 := fc.Now()
	var hits atomic.Int32
	gate := make(chan struct{})
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := hits.Add(1)
		resp := response(req, 200, "ok")
		if n == 5 {
			<-gate // counted now; its answer is read after the reset
			resp.Header.Set("X-RateLimit-Remaining", "0")
			resp.Header.Set("X-RateLimit-Reset", "1")
			return resp, nil
		}
		// The server's count: windows of 10 s from t0, 5 each.
		el := fc.Since(t0)
		used := 1 + (n-1)%5
		if el >= 10*time.Second {
			used = n - 5
		}
		reset := int((10*time.Second - el%(10*time.Second) + time.Second - 1) / time.Second)
		resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(5-int(used)))
		resp.Header.Set("X-RateLimit-Reset", strconv.Itoa(reset))
		return resp, nil
	})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	ctx := context.Background()
	for i := range 4 { // 4 of the 5, at 0, 1, 2, 3 s
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(time.Second)
	}
	fc.Advance(5600 * time.Millisecond) // 9.6 s: the fifth is sent
	ch := start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))
	for hits.Load() < 5 {
		time.Sleep(50 * time.Microsecond) // a poll, not a timing assumption
	}
	fc.Advance(500 * time.Millisecond) // 10.1 s: the server's window renewed
	close(gate)
	if r := await(t, ch); r.err != nil {
		t.Fatalf("request 5: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 10.2 s
	refused := 0
	var firstErr error
	for range 4 {
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			refused++
			firstErr = cmpOr(firstErr, r.err)
			continue
		}
		r.resp.Body.Close()
	}
	if refused > 0 {
		t.Errorf("at 10.2 s, in a new 10 s window whose 5 requests the server has not started on, %d of 4 requests were refused locally (%v); want none: the answer read at 10.1 s (0 left, reset in 1) was counted before the reset, yet it was taken as a new window with nothing left (docs/overload.md: quota pacing must not refuse a server that has quota left)", refused, firstErr)
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestQuotaLate429OfThePreviousWindowLeavesTheRenewedWindowOpen: another
// process spends one of the window's 5 unseen, so this process's fifth
// request, sent at 9.6 s with one left by its count, meets the window's
// one 429 ("0 left, reset in 1"), read 0.1 s after the reset, when the
// window was already renewed here (a request at 10.05 s was admitted from
// the new window of 5). A 429 sent before the held window began says
// nothing of it: the requests that follow are sent while the server's new
// window has 4 left.
func TestQuotaLate429OfThePreviousWindowLeavesTheRenewedWindowOpen(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv := newSlowQuotaServer(fc, 10*time.Second, 5)
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	ctx := context.Background()
	for i := range 4 { // 4 of the 5, at 0, 1, 2, 3 s
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(time.Second)
	}
	fc.Advance(time.Second) // 5 s: another process spends the last one
	srv.spendOther(1)
	fc.Advance(4600 * time.Millisecond) // 9.6 s: one left by this process's count
	slow := start(tr, newRequest(t, ctx, "GET", "http://api.test/slow", nil))
	waitClosed(t, srv.arrived, "the slow request's arrival")
	close(srv.count)
	waitClosed(t, srv.counted, "the slow request's count")
	fc.Advance(450 * time.Millisecond) // 10.05 s: a new window at the server and here
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil {
		t.Fatalf("the first request of the new window was refused: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(50 * time.Millisecond) // 10.1 s: the late 429 is read
	close(srv.release)
	if r := await(t, slow); r.err != nil {
		t.Fatalf("slow request: %v", r.err)
	} else {
		if r.resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the slow request got %d, want the window's 429", r.resp.StatusCode)
		}
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 10.2 s
	if refused, err := refusedAt(t, tr, 3); refused > 0 {
		t.Errorf("at 10.2 s, with 4 of the server's new window of 5 left, %d of 3 requests were refused locally (%v); want none: the 429 read at 10.1 s was the last window's (sent at 9.6 s, reset in 1), yet it replaced the renewed window with one ending at 11.1 s with nothing left (docs/overload.md: quota pacing must not refuse a server that has quota left)", refused, err)
	}
}

// refusedAt sends n requests at the fake clock's time and returns
// how many were refused, and the first error.
func refusedAt(t *testing.T, tr *Transport, n int) (int, error) {
	t.Helper()
	refused := 0
	var firstErr error
	for range n {
		r := await(t, start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil)))
		if r.err != nil {
			refused++
			firstErr = cmpOr(firstErr, r.err)
			continue
		}
		r.resp.Body.Close()
	}
	return refused, firstErr
}

// TestQuotaUntimedLateAnswerLeavesTheRenewedWindowOpen: the operation
// whose answer arrives late was admitted while its destination had no
// quota known yet, so its attempt read no clock when sent. Its answer,
// counted by the server 0.4 s before the reset ("0 left, reset in 1") and
// read 0.1 s after it, is placed from the time the quota first became
// known, at the latest, not from its read: it is the old window's last
// word, not a new window with nothing left, and the requests that follow
// are sent.
func TestQuotaUntimedLateAnswerLeavesTheRenewedWindowOpen(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv := newSlowQuotaServer(fc, 10*time.Second, 5)
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	ctx := context.Background()
	// At 0 s, to an idle destination: a slow request the server counts
	// only at 9.6 s.
	slow := start(tr, newRequest(t, ctx, "GET", "http://api.test/slow", nil))
	waitClosed(t, srv.arrived, "the slow request's arrival")
	for i := range 4 { // 4 of the 5, at 0, 1, 2, 3 s: the quota is known
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(time.Second)
	}
	fc.Advance(5600 * time.Millisecond) // 9.6 s
	close(srv.count)
	waitClosed(t, srv.counted, "the slow request's count")
	fc.Advance(500 * time.Millisecond) // 10.1 s: the server's window renewed
	close(srv.release)
	if r := await(t, slow); r.err != nil {
		t.Fatalf("slow request: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 10.2 s
	if refused, err := refusedAt(t, tr, 4); refused > 0 {
		t.Errorf("at 10.2 s, in a new 10 s window whose 5 requests the server has not started on, %d of 4 requests were refused locally (%v); want none: the slow answer read at 10.1 s (0 left, reset in 1) of an operation admitted before the quota was known was counted before the reset, yet it was taken as a new window with nothing left (docs/overload.md: quota pacing must not refuse a server that has quota left; a late answer is the old window's last word)", refused, err)
	}
}

// TestQuotaUntimedLate429LeavesTheLiveWindowOpen: 5 s windows of 5. An
// operation sent at 4.4 s, before the quota was known (untimed), is
// counted at 4.6 s and gets the window's 429 ("0 left, reset in 1"). A
// request at 4.5 s learns the quota; at 5.6 s a request renews it and the
// server's answer ("4 left, reset in 5") sets the held window to end at
// 10.6 s. The untimed 429, read at 8 s, was sent before the held window
// began and does not replace it: the process keeps sending in the server's
// window [5 s, 10 s), which has 4 left.
func TestQuotaUntimedLate429LeavesTheLiveWindowOpen(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv := newSlowQuotaServer(fc, 5*time.Second, 5)
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	ctx := context.Background()
	fc.Advance(4400 * time.Millisecond) // 4.4 s: nothing known yet
	slow := start(tr, newRequest(t, ctx, "GET", "http://api.test/slow", nil))
	waitClosed(t, srv.arrived, "the slow request's arrival")
	fc.Advance(100 * time.Millisecond) // 4.5 s: the quota becomes known, 1 left
	srv.spendOther(3)
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil {
		t.Fatalf("request at 4.5 s: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 4.6 s: another process spends the last; the slow one is counted
	srv.spendOther(1)
	close(srv.count)
	waitClosed(t, srv.counted, "the slow request's count")
	fc.Advance(time.Second) // 5.6 s: the new window
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil {
		t.Fatalf("the first request of the new window was refused: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(2400 * time.Millisecond) // 8 s: the slow 429 is read
	close(srv.release)
	if r := await(t, slow); r.err != nil {
		t.Fatalf("slow request: %v", r.err)
	} else {
		if r.resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the slow request got %d, want the window's 429", r.resp.StatusCode)
		}
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 8.1 s
	left := srv.leftIn(1)
	refused := 0
	var first error
	for range 3 {
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			if errors.Is(r.err, throttle.ErrQuotaExhausted) {
				refused++
			}
			first = cmpOr(first, r.err)
			continue
		}
		r.resp.Body.Close()
	}
	if refused > 0 {
		t.Errorf("at 8.1 s, 3.1 s after the server's reset, with %d of its window of 5 left, %d of 3 requests were refused locally (%v); want none: quota pacing must not refuse a server that has quota left. The untimed 429 read at 8 s (counted at 4.6 s, reset in 1) was placed at its read and replaced the held window (ending 10.6 s, set by a timed answer) with one spent until 9 s", left, refused, first)
	}
}

// TestQuotaBurstAfterALateRenewalGetsAtMostOne429: a quota of 10 per 1s
// window, the reset announced in whole seconds rounded up, so the client
// first places its window's end up to a second after the server's. Half
// of the server's next window is then spent (its responses say 5 left),
// and 10 callers start at once just after the client's own reset: the
// client must not renew the window to 10 while the server's still has
// 5. At most one 429 in any window.
func TestQuotaBurstAfterALateRenewalGetsAtMostOne429(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 10, time.Second)
	gate := make(chan struct{})
	var held atomic.Bool
	var entered atomic.Int64
	srv.answer = func(*http.Request, int) (int, error) {
		if held.Load() {
			entered.Add(1)
			<-gate
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, admitAll)}
	get := func() error {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	fc.Advance(500 * time.Millisecond)
	if err := get(); err != nil { // window 0; the client's reset: 1.5s
		t.Fatal(err)
	}
	fc.Advance(700 * time.Millisecond)
	for range 5 { // window 1: 5 left
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(400 * time.Millisecond) // 1.6s: past the client's reset, in the server's window 1
	held.Store(true)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if get() != nil {
				refused.Add(1)
			}
		})
	}
	for end := time.Now().Add(5 * time.Second); entered.Load()+refused.Load() < 10 && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // a poll, not a timing assumption
	}
	close(gate)
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for w, n := range srv.tooMany {
		if n > 1 {
			t.Errorf("window %d: %d 429s from 10 callers starting together; want at most 1", w, n)
		}
	}
}
