package throttle

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestRejectProbability(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		req, acc, k, max, m float64
		want                float64
	}{
		{"nothing counted", 0, 0, 2, 0.9, 0, 0},
		{"all accepted", 100, 100, 2, 0.9, 0, 0},
		{"half accepted, K 2: none refused", 100, 50, 2, 0.9, 0, 0},
		{"a third accepted, K 2", 99, 33, 2, 1, 0, 33.0 / 100},
		{"none accepted, uncapped", 9, 0, 2, 1, 0, 0.9},
		{"none accepted, capped", 1000, 0, 2, 0.9, 0, 0.9},
		{"a quarter accepted, K 1.1", 100, 25, 1.1, 0.9, 0, (100 - 27.5) / 101},
		{"below the minimum rate", 4, 0, 2, 0.9, 5, 0},
		{"at the minimum rate", 5, 0, 2, 0.9, 5, 5.0 / 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := rejectProbability(tt.req, tt.acc, tt.k, tt.max, tt.m)
			if math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("rejectProbability(%v, %v, K %v, max %v, min %v) = %v; want %v", tt.req, tt.acc, tt.k, tt.max, tt.m, got, tt.want)
			}
		})
	}
}

// throttleAt counts n results into th's state for key "k" at fc's time,
// accepted or not.
func throttleAt(th *Throttle, s *Dest, fc clockwork.Clock, n int, accepted bool) {
	status := 503
	if accepted {
		status = 200
	}
	for range n {
		th.record(s, &http.Response{StatusCode: status, Header: http.Header{}}, nil, time.Time{}, fc)
	}
}

// TestThrottleRefusesWithTheSREProbability: after 30 attempts of which 10
// were accepted, K 2, the probability is (30 − 20)/31: a draw just below
// it is refused, one at it is admitted; the refusal counts as a request.
func TestThrottleRefusesWithTheSREProbability(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var r float64
	th := &Throttle{MinRate: -1, draws: func() float64 { return r }}
	s := th.dests.Get("k", 0, newDest)
	throttleAt(th, s, fc, 10, true)
	throttleAt(th, s, fc, 20, false)
	p := 10.0 / 31
	r = p
	if _, err := th.admit(s, fc); err != nil {
		t.Fatalf("draw %v at p: %v; want admitted", r, err)
	}
	r = math.Nextafter(p, 0)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("draw %v below p: %v; want ErrThrottled", r, err)
	}
	req, acc, _ := s.w.counts()
	if req != 31 || acc != 10 {
		t.Errorf("window holds %v requests, %v accepts; want 31 and 10 (the refusal counted)", req, acc)
	}
	// p is now (31 − 20)/32.
	r = math.Nextafter(11.0/32, 0)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Errorf("second draw %v: %v; want ErrThrottled", r, err)
	}
}

// TestThrottleCapsRefusals: with nothing accepted, MaxReject caps the
// probability: a draw at the cap is admitted.
func TestThrottleCapsRefusals(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var r float64
	th := &Throttle{draws: func() float64 { return r }}
	s := th.dests.Get("k", 0, newDest)
	throttleAt(th, s, fc, 1000, false)
	r = DefaultMaxReject
	if _, err := th.admit(s, fc); err != nil {
		t.Errorf("draw at the cap 0.9: %v; want admitted", err)
	}
	r = math.Nextafter(DefaultMaxReject, 0)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Errorf("draw below the cap: %v; want ErrThrottled", err)
	}
}

// TestThrottleMinRate: below MinRate requests per second, over the time
// the counts reach back, nothing is refused, whatever the failures.
func TestThrottleMinRate(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{MinRate: 5, Window: time.Second, draws: func() float64 { return 0 }}
	s := th.dests.Get("k", 0, newDest)
	throttleAt(th, s, fc, 4, false)
	// Fewer than 10 requests and no accept: the counts reach back over
	// the whole ring, 5s, where 4 requests are below 5/s.
	if _, err := th.admit(s, fc); err != nil {
		t.Fatalf("after 4 failures: %v; want admitted below 5/s", err)
	}
	throttleAt(th, s, fc, 6, false)
	// 10 requests in the 1s window: 10/s.
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Errorf("after 10 failures: %v; want ErrThrottled", err)
	}
}

// TestThrottleReachesBackAtLowRates: a destination failing twice a
// second has 2 requests in an 800ms window; the counts reach back over
// older buckets, to 4s, and the probability is the SRE form's on the 8
// failures there: 8/9. Once an accept comes, the failures before the
// window are left out: the window's own counts decide, with the
// accepts, none here, from before it. No minimum number of requests
// (MinRate -1), so that the reach alone is seen.
func TestThrottleReachesBackAtLowRates(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var r float64
	th := &Throttle{Window: 800 * time.Millisecond, MinRate: -1, draws: func() float64 { return r }}
	s := th.dests.Get("k", 0, newDest)
	for i := range 8 {
		if i > 0 {
			fc.Advance(500 * time.Millisecond)
		}
		throttleAt(th, s, fc, 1, false)
	}
	s.mu.Lock()
	req, acc, n := s.w.counts()
	s.mu.Unlock()
	if req != 8 || acc != 0 || n != throttleRing {
		t.Fatalf("counts %v requests, %v accepts over %d buckets; want 8, 0 over the whole ring", req, acc, n)
	}
	p := 8.0 / 9
	r = p
	if _, err := th.admit(s, fc); err != nil {
		t.Fatalf("draw at p = 8/9: %v; want admitted", err)
	}
	r = math.Nextafter(p, 0)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("draw just below 8/9: %v; want ErrThrottled", err)
	}
	// The refusal counted: 9 requests. Then an accept, 100ms later: the
	// 800ms window holds the failures at 3s and 3.5s, the refusal and
	// the accept; the older failures are left out.
	fc.Advance(100 * time.Millisecond)
	throttleAt(th, s, fc, 1, true)
	s.mu.Lock()
	req, acc, n = s.w.counts()
	s.mu.Unlock()
	if req != 4 || acc != 1 || n != throttleRing {
		t.Fatalf("after an accept: %v requests, %v accepts over %d buckets; want 4, 1 over the ring", req, acc, n)
	}
	p = (4.0 - 2) / 5
	r = p
	if _, err := th.admit(s, fc); err != nil {
		t.Fatalf("after an accept, draw at p = 2/5: %v; want admitted", err)
	}
	r = math.Nextafter(p, 0)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("after an accept, draw just below 2/5: %v; want ErrThrottled", err)
	}
}

func TestCountBack(t *testing.T) {
	t.Parallel()
	ring := func(at map[int]bucket) *[throttleRing]bucket {
		var r [throttleRing]bucket
		for i, b := range at {
			r[i] = b
		}
		return &r
	}
	tests := []struct {
		name     string
		ring     *[throttleRing]bucket
		head     int
		req, acc float64
		n        int
	}{
		{"empty: the whole ring", ring(nil), 0, 0, 0, throttleRing},
		{"enough in the window", ring(map[int]bucket{0: {10, 0}, 35: {5, 0}}), 0, 10, 0, throttleBuckets},
		{"an accept in the window, too few: the whole ring, its accepts", ring(map[int]bucket{0: {2, 1}, 35: {5, 0}}), 0, 2, 1, throttleRing},
		{"reaches back to 10 requests", ring(map[int]bucket{3: {4, 0}, 49: {3, 0}, 30: {3, 0}, 20: {9, 0}}), 3, 10, 0, 24},
		{"reaches back past an accept: its accepts alone", ring(map[int]bucket{3: {4, 0}, 40: {9, 6}, 30: {3, 0}}), 3, 10, 6, 14},
		{"past an accept, older failures left out", ring(map[int]bucket{3: {4, 0}, 40: {2, 1}, 30: {3, 0}}), 3, 5, 1, throttleRing},
		{"an accept in the window: older failures left out", ring(map[int]bucket{3: {4, 1}, 40: {2, 0}, 30: {3, 3}}), 3, 7, 4, throttleRing},
		{"wraps round the ring", ring(map[int]bucket{5: {1, 0}, 6: {1, 0}}), 5, 2, 0, throttleRing},
		{"the first bucket past the window holds an accept: its accepts alone", ring(map[int]bucket{0: {2, 0}, 40: {5, 1}}), 0, 3, 1, throttleRing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, acc, n := countBack(tt.ring, tt.head)
			if req != tt.req || acc != tt.acc || n != tt.n {
				t.Errorf("countBack = %v, %v, %d; want %v, %v, %d", req, acc, n, tt.req, tt.acc, tt.n)
			}
		})
	}
}

// TestThrottleWindowRollsOver: counts leave the window bucket by bucket:
// failures of 900ms ago still count, of 1s ago no longer (the window
// holds enough requests not to reach back).
func TestThrottleWindowRollsOver(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{MinRate: -1, Window: time.Second, draws: func() float64 { return 0 }}
	s := th.dests.Get("k", 0, newDest)
	throttleAt(th, s, fc, 10, false) // bucket 0
	fc.Advance(500 * time.Millisecond)
	throttleAt(th, s, fc, 10, false) // bucket 5
	fc.Advance(400 * time.Millisecond)
	s.mu.Lock()
	s.sync(th, fc.Now())
	req, _, _ := s.w.counts()
	s.mu.Unlock()
	if req != 20 {
		t.Errorf("at 900ms the window holds %v requests; want 20", req)
	}
	fc.Advance(100 * time.Millisecond)
	s.mu.Lock()
	s.sync(th, fc.Now())
	req, _, _ = s.w.counts()
	s.mu.Unlock()
	if req != 10 {
		t.Errorf("at 1s the window holds %v requests; want the 10 of 500ms", req)
	}
	fc.Advance(5 * time.Second)
	if _, err := th.admit(s, fc); err != nil {
		t.Errorf("5 windows after the last failure: %v; want admitted", err)
	}
	if s.hot.Load() {
		t.Error("5 windows after the last signal the destination is still hot: every decision reads the clock")
	}
}

// TestThrottleCreditsQuietAccepts: accepts counted without the clock,
// before any failure, count in the window when failures start, so a
// healthy destination is not refused for its first failures.
func TestThrottleCreditsQuietAccepts(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{Window: 800 * time.Millisecond, draws: func() float64 { return 0 }}
	s := th.dests.Get("k", 0, newDest)
	fc.Advance(time.Second)
	for range 10 { // 100 accepts a second
		throttleAt(th, s, fc, 10, true)
		fc.Advance(100 * time.Millisecond)
	}
	throttleAt(th, s, fc, 20, false)
	if _, err := th.admit(s, fc); err != nil {
		t.Errorf("after a second of 100 accepts, 20 failures: %v; want admitted", err)
	}
	req, acc, _ := s.w.counts()
	// The window is 800ms: the accepts of its time, about 80, spread
	// over the times they were counted in, not all credited to now.
	if acc < 70 || acc > 90 || req != acc+20 {
		t.Errorf("window: %v requests, %v accepts; want the last 800ms's ~80 accepts credited, and the 20 failures", req, acc)
	}
}

// evenDraws returns a fixed sequence of draws spread evenly over [0, 1)
// at every scale (the golden-ratio sequence), so that a simulation's
// result depends on no seed and any stretch of draws samples [0, 1)
// evenly.
func evenDraws() func() float64 {
	x := 0.0
	return func() float64 {
		x += 0.6180339887498949
		x -= math.Floor(x)
		return x
	}
}

// throttleSim drives th at rate operations a second, in 10ms steps, with a
// server that accepts while healthy(now); each admitted operation makes
// one attempt. It returns the fraction of operations admitted in each
// 100ms.
func throttleSim(th *Throttle, fc *clockwork.FakeClock, rate int, d time.Duration, healthy func(time.Duration) bool) []float64 {
	s := th.dests.Get("k", 0, newDest)
	const step = 10 * time.Millisecond
	per := rate * int(step) / int(time.Second)
	var out []float64
	admitted, total := 0, 0
	for t := time.Duration(0); t < d; t += step {
		for range per {
			total++
			if _, err := th.admit(s, fc); err != nil {
				continue
			}
			admitted++
			throttleAt(th, s, fc, 1, healthy(t))
		}
		fc.Advance(step)
		if (t+step)%(100*time.Millisecond) == 0 {
			out = append(out, float64(admitted)/float64(total))
			admitted, total = 0, 0
		}
	}
	return out
}

// TestThrottleOutageAndRecovery: 1000 operations a second, a 10s outage,
// then healthy. During the outage at most the cap's 10% reaches the
// server (the first window's refusals build up); after healing, the
// admitted fraction is back to 95% within 1.5s with the default Window
// (1.1s on this clock; the scenarios' target is 2s), and all are admitted
// in the healthy phase.
func TestThrottleOutageAndRecovery(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: evenDraws()}
	healthy := func(t time.Duration) bool { return t < 2*time.Second || t >= 12*time.Second }
	admitted := throttleSim(th, fc, 1000, 20*time.Second, healthy)
	outage := 0.0
	for _, a := range admitted[30:120] { // 3s to 12s: the first second builds the counts
		outage += a
	}
	if outage /= 90; outage > 0.11 {
		t.Errorf("during the outage %.3f of operations reached the server; want at most 0.11", outage)
	}
	recovered := -1
	for j := 120; j < len(admitted); j++ {
		if admitted[j] >= 0.95 {
			recovered = j - 120 + 1
			break
		}
	}
	if recovered < 0 || recovered > 15 {
		t.Fatalf("admitted fraction per 100ms after healing: %v; want ≥ 0.95 within 1.5s", admitted[120:])
	}
	t.Logf("recovered to ≥95%% admitted within %dms of healing", recovered*100)
	for j := 0; j < 20; j++ {
		if admitted[j] != 1 {
			t.Errorf("healthy phase, at %dms: %.3f admitted; want all", j*100, admitted[j])
		}
	}
}

// TestThrottleBrownout: a server that can accept a fixed number of
// requests a second. At half the offered load, K 2 refuses nothing: the
// server sees twice what it accepts. At a third, the throttle settles
// where the server sees about K times what it accepts.
func TestThrottleBrownout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		capacity float64 // accepted per 10ms step, of 10 offered
		min, max float64
	}{{5, 0.99, 1}, {10.0 / 3, 0.6, 0.73}} {
		fc := clockwork.NewFakeClock()
		th := &Throttle{draws: evenDraws()}
		var stepAt time.Duration
		used := 0
		server := func(now time.Duration) bool {
			if now != stepAt {
				stepAt, used = now, 0
			}
			used++
			return float64(used) <= tt.capacity
		}
		admitted := throttleSim(th, fc, 1000, 10*time.Second, server)
		var sum float64
		for _, a := range admitted[20:] {
			sum += a
		}
		if avg := sum / float64(len(admitted)-20); avg < tt.min || avg > tt.max {
			t.Errorf("capacity %v of 10: %.3f admitted; want within [%v, %v]", tt.capacity, avg, tt.min, tt.max)
		}
	}
}

// TestThrottleKeysBounded: a Throttle holds at most MaxKeys destinations.
func TestThrottleKeysBounded(t *testing.T) {
	t.Parallel()
	th := &Throttle{MaxKeys: 8}
	for i := range 100 {
		req := httptest.NewRequest("GET", fmt.Sprintf("http://h%d.test/", i), nil)
		th.Dest(req)
	}
	if n := th.dests.Len(); n != 8 {
		t.Errorf("%d destinations held; want MaxKeys, 8", n)
	}
}

// TestThrottleConcurrent: many goroutines deciding and recording for two
// destinations at once (run it with -race): the counts stay consistent,
// the healthy destination is never refused, and the failing one is.
func TestThrottleConcurrent(t *testing.T) {
	t.Parallel()
	th := &Throttle{}
	up := httptest.NewRequest("GET", "http://up.test/", nil)
	down := httptest.NewRequest("GET", "http://down.test/", nil)
	ok := &http.Response{StatusCode: 200, Header: http.Header{}}
	busy := &http.Response{StatusCode: 503, Header: http.Header{}}
	var wg sync.WaitGroup
	var upRefused, downRefused atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				s := th.Dest(up)
				if _, err := th.admit(s, realClock); err != nil {
					upRefused.Add(1)
				} else {
					th.record(s, ok, nil, time.Time{}, realClock)
				}
				s = th.Dest(down)
				if _, err := th.admit(s, realClock); err != nil {
					downRefused.Add(1)
				} else {
					th.record(s, busy, nil, time.Time{}, realClock)
				}
			}
		})
	}
	wg.Wait()
	if n := upRefused.Load(); n != 0 {
		t.Errorf("the healthy destination was refused %d times; want never", n)
	}
	if n := downRefused.Load(); n < 8000 {
		t.Errorf("the failing destination was refused %d of 16000 times; want most", n)
	}
	s := th.Dest(down)
	s.mu.Lock()
	req, acc, _ := s.w.counts()
	s.mu.Unlock()
	if acc != 0 || req > 16000 {
		t.Errorf("failing destination's window: %v requests, %v accepts; want no accepts, at most 16000 requests", req, acc)
	}
}

// TestThrottleLowRateOutageAndRecovery: one process calling a destination
// four times a second, as each of a fleet of 100 sharing 400 a second
// does, with the default Throttle. During a 10s outage, once the counts no
// longer reach back to before it (3s, five windows), at most 15% of its
// operations reach the server (the counts reach back to hold enough
// failures: the 12 of 3s are more than the 10 the throttle needs);
// once the server has healed, the first operation admitted and accepted
// outweighs the failures before it, and every operation after it is
// admitted.
func TestThrottleLowRateOutageAndRecovery(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: evenDraws()}
	s := th.dests.Get("k", 0, newDest)
	const every = 250 * time.Millisecond
	healthy := func(t time.Duration) bool { return t < 4*time.Second || t >= 14*time.Second }
	sent, offered := 0, 0
	healed := time.Duration(-1) // when the first accept after the outage came
	for at := time.Duration(0); at < 24*time.Second; at += every {
		_, err := th.admit(s, fc)
		switch {
		case at >= 7*time.Second && at < 14*time.Second:
			offered++
			if err == nil {
				sent++
			}
		case healed >= 0 && err != nil:
			t.Fatalf("at %v, after the first accept at %v: %v; want every operation admitted", at, healed, err)
		}
		if err == nil {
			throttleAt(th, s, fc, 1, healthy(at))
			if healed < 0 && at >= 14*time.Second {
				healed = at
			}
		}
		fc.Advance(every)
	}
	if share := float64(sent) / float64(offered); share > 0.15 {
		t.Errorf("outage, 7s to 14s: %d of %d operations sent (%.2f); want at most 0.15", sent, offered, share)
	}
	if healed < 0 || healed > 24*time.Second {
		t.Fatalf("no operation admitted after healing")
	}
	t.Logf("outage: %d of %d sent; first accept %v after healing", sent, offered, healed-14*time.Second)
}

func TestFoldSpan(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	width := 80 * time.Millisecond
	tests := []struct {
		name     string
		lastFold time.Time
		first    int64
		want     time.Duration
	}{
		{"since the last fold", now.Add(-300 * time.Millisecond), stamp(now.Add(-4 * time.Second)), 300 * time.Millisecond},
		{"before the first fold: since the first accept", time.Time{}, stamp(now.Add(-4 * time.Second)), 4 * time.Second},
		{"a first accept just now: one bucket", time.Time{}, stamp(now), width},
		{"neither known: one bucket", time.Time{}, 0, width},
		{"a quiet spell longer than the ring: the ring", now.Add(-10 * time.Minute), 0, throttleRing * width},
		{"before the first fold, a first accept long ago: the ring", time.Time{}, stamp(now.Add(-10 * time.Minute)), throttleRing * width},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := foldSpan(tt.lastFold, tt.first, now, width); got != tt.want {
				t.Errorf("foldSpan = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestThrottleSpreadsFirstAcceptsOverTheirTime: a destination called
// twice a second for 4s, all accepted, then failing: its 8 accepts, never
// folded before, are spread over the 3.5s since the first, so the 800ms
// window holds 8·0.8/3.5 of them, not all 8 as if they had just come; 3
// failures then make the throttle refuse with (4.83 − 2·1.83)/5.83 (no
// minimum number of requests: MinRate -1).
func TestThrottleSpreadsFirstAcceptsOverTheirTime(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var r float64
	th := &Throttle{Window: 800 * time.Millisecond, MinRate: -1, draws: func() float64 { return r }}
	s := th.dests.Get("k", 0, newDest)
	for i := range 8 {
		if i > 0 {
			fc.Advance(500 * time.Millisecond)
		}
		throttleAt(th, s, fc, 1, true)
	}
	throttleAt(th, s, fc, 3, false)
	s.mu.Lock()
	req, acc, _ := s.w.counts()
	s.mu.Unlock()
	inWindow := 8 * 0.8 / 3.5
	if math.Abs(acc-inWindow) > 1e-9 || math.Abs(req-(inWindow+3)) > 1e-9 {
		t.Fatalf("counts %v requests, %v accepts; want %v and %v", req, acc, inWindow+3, inWindow)
	}
	p := (req - 2*acc) / (req + 1)
	r = math.Nextafter(p, 0)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Errorf("draw just below %v: %v; want ErrThrottled", p, err)
	}
}

// TestThrottleStaysHotWhileTheCountsReachBack: 10 failures, then 2s of
// silence with a 1s window: the window proper is empty, but the counts
// reach back to the failures, so the destination is still hot and an
// operation is refused (p capped at 0.9, a draw of 0); only after five
// windows of silence is it cold and admitted without a decision.
func TestThrottleStaysHotWhileTheCountsReachBack(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{MinRate: -1, Window: time.Second, draws: func() float64 { return 0 }}
	s := th.dests.Get("k", 0, newDest)
	throttleAt(th, s, fc, 10, false)
	fc.Advance(2 * time.Second)
	if _, err := th.admit(s, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("2s after 10 failures: %v; want ErrThrottled", err)
	}
	if !s.hot.Load() {
		t.Error("2s after the last failure, the state is cold")
	}
	fc.Advance(5 * time.Second)
	if _, err := th.admit(s, fc); err != nil {
		t.Errorf("5s after the last refusal: %v; want admitted", err)
	}
	if s.hot.Load() {
		t.Error("5 windows after the last refusal, the state is still hot")
	}
}
