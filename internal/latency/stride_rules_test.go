package latency

import (
	"sync"
	"testing"
	"time"
)

// strideClock feeds a Dist attempts on a time of its own: each attempt
// ends gap after the previous one and took lat; Times decides whether it
// is recorded, as the Transport's callers do.
type strideClock struct {
	d   *Dist
	now time.Time
}

func newStrideClock(d *Dist) *strideClock {
	return &strideClock{d: d, now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
}

func (c *strideClock) attempt(gap, lat time.Duration, censored bool) bool {
	c.now = c.now.Add(gap)
	if !c.d.Times() {
		return false
	}
	c.d.Record(lat, censored, c.now.Add(-lat))
	return true
}

// rawHedge is the learned hedge quantile, with no floor.
func rawHedge(t *testing.T, d *Dist) time.Duration {
	t.Helper()
	q, ok := d.HedgeDelay(1, 0)
	if !ok {
		t.Fatal("no hedge delay learned")
	}
	return q
}

// A stride chooses the attempts it times by count, so the latencies it
// keeps must not depend on where an attempt falls in a periodic pattern:
// a sequential client whose every fourth request to one key is slow (three
// cheap lookups, then the fetch they name) has a median that is the fast
// requests' and a 98th percentile that is the slow one's, whatever the
// stride. Each position of the slow request in the period is tried.
func TestStrideKeepsEveryPartOfAPeriodicWorkload(t *testing.T) {
	t.Parallel()
	const fast, slow = 2 * time.Microsecond, 40 * time.Microsecond
	for pos := range 4 {
		s := New(Config{HedgeQuantile: 0.98, Learn: &Learn{Quantile: 0.5, Factor: 1}, MaxKeys: 1, Burst: 10})
		d := s.Lookup("k")
		c := newStrideClock(d)
		// Sequential: each attempt ends its own latency after the
		// previous, about 8,700 attempts per 100 ms: a stride of 4.
		var slowTimed, fastTimed int
		for i := range 400_000 {
			lat := fast
			if i%4 == pos {
				lat = slow
			}
			if c.attempt(lat, lat, false) && i >= 200_000 {
				if lat == slow {
					slowTimed++
				} else {
					fastTimed++
				}
			}
		}
		if sh := d.shift.Load(); sh == 0 {
			t.Fatalf("stride 1 at %v per attempt; this test needs a stride", (3*fast+slow)/4)
		}
		if slowTimed == 0 || fastTimed == 0 {
			t.Errorf("slow at %d of 4: stride 1<<%d timed %d fast and %d slow attempts; want both kinds", pos, d.shift.Load(), fastTimed, slowTimed)
		}
		if q, med := rawHedge(t, d), d.AttemptLimit(1); q != slow || med != fast {
			t.Errorf("slow at %d of 4: 98th percentile %v, median %v; want %v and %v", pos, q, med, slow, fast)
		}
	}
}

// Under hedging, an operation whose hedge fires offers two latencies in
// a row: the winner's answer, then the loser's censored one. A stride of
// two must not keep only one of the pair.
func TestStrideKeepsWinnersAndCensoredLosersAlike(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	c := newStrideClock(d)
	var answers, censored int
	for i := range 200_000 {
		// Winner ends after 20µs, loser is cut then at 10µs.
		a := c.attempt(10*time.Microsecond, 20*time.Microsecond, false)
		l := c.attempt(0, 10*time.Microsecond, true)
		if i >= 100_000 {
			if a {
				answers++
			}
			if l {
				censored++
			}
		}
	}
	if sh := d.shift.Load(); sh == 0 {
		t.Fatal("no stride; this test needs one")
	}
	if answers == 0 || censored == 0 {
		t.Errorf("stride 1<<%d kept %d answers and %d censored losers of hedged operations; want both", d.shift.Load(), answers, censored)
	}
	// Every operation answered in 20µs; its loser was cut at 10µs.
	if q := rawHedge(t, d); q != 20*time.Microsecond {
		t.Errorf("98th percentile of attempts that all answer in 20µs = %v; want 20µs", q)
	}
}

// After a million fast attempts, a tail of slow ones at ten a second is
// timed within a stride of attempts, the stride returns to 1, and the
// hedge delay follows the slow latencies once they fill most of the
// window's answers.
func TestStrideDecaysAndDelayFollowsASlowTailAfterABurst(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	c := newStrideClock(d)
	for range 1_000_000 {
		c.attempt(time.Microsecond, 100*time.Microsecond, false)
	}
	if sh := d.shift.Load(); sh < 4 {
		t.Fatalf("stride 1<<%d after a second at a million a second; want at least 1<<4", sh)
	}
	if q := rawHedge(t, d); q != 100*time.Microsecond {
		t.Fatalf("hedge quantile %v after the burst; want 100µs", q)
	}
	untimed := 0
	for i := range 3 * Window {
		if !c.attempt(100*ms, 50*ms, false) {
			untimed++
			if i >= 1<<maxShift {
				t.Fatalf("slow attempt %d not timed; want every one after a stride", i)
			}
		}
	}
	if sh := d.shift.Load(); sh != 0 {
		t.Errorf("stride 1<<%d at ten a second", sh)
	}
	if q := rawHedge(t, d); q != 50*ms {
		t.Errorf("hedge quantile %v after %d slow attempts; want 50ms", q, 3*Window)
	}
}

// Fast and slow phases alternate, each 300 ms of fake time: the delay
// follows each phase, and the stride tracks the phase's rate.
func TestStrideFollowsAlternatingRatePhases(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	c := newStrideClock(d)
	for round := range 4 {
		// Fast phase: a million a second, each 1ms long.
		for range 300_000 {
			c.attempt(time.Microsecond, ms, false)
		}
		if sh := d.shift.Load(); sh < 4 {
			t.Fatalf("round %d: stride 1<<%d in the fast phase", round, sh)
		}
		if q := rawHedge(t, d); q != ms {
			t.Fatalf("round %d: hedge quantile %v at the end of the fast phase; want 1ms", round, q)
		}
		// Slow phase: a thousand a second, each 7ms long: after 3 s the
		// window holds only slow ones.
		for range 3000 {
			c.attempt(ms, 7*ms, false)
		}
		if sh := d.shift.Load(); sh != 0 {
			t.Fatalf("round %d: stride 1<<%d in the slow phase", round, sh)
		}
		if q := rawHedge(t, d); q != 7*ms {
			t.Fatalf("round %d: hedge quantile %v at the end of the slow phase; want 7ms", round, q)
		}
	}
}

// A rate right at the threshold, 2 × Window per RecomputeEvery, and just
// under it: the stride stays at most 1<<1, never running away to the cap.
func TestStrideAtTheThresholdStaysSmall(t *testing.T) {
	t.Parallel()
	for _, perComputation := range []int{2*Window - 50, 2 * Window, 2*Window + 50, 4*Window - 50, 4 * Window} {
		d := hedgeSet().Lookup("k")
		c := newStrideClock(d)
		gap := RecomputeEvery / time.Duration(perComputation)
		maxSh := int64(0)
		for i := range 40 * perComputation {
			c.attempt(gap, ms, false)
			if i > 10*perComputation {
				maxSh = max(maxSh, d.shift.Load())
			}
		}
		want := strideShift(Window, int64(perComputation), RecomputeEvery)
		if maxSh > want+1 {
			t.Errorf("%d attempts per %v: stride reached 1<<%d; want at most 1<<%d", perComputation, RecomputeEvery, maxSh, want+1)
		}
	}
}

// A clock that never advances (a fake clock nobody moves) makes no
// stride, however many attempts end on it.
func TestNoStrideOnAClockThatNeverAdvances(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	c := newStrideClock(d)
	for range 200_000 {
		if !c.attempt(0, 0, false) {
			t.Fatal("an attempt on a still clock not timed")
		}
	}
	if sh := d.shift.Load(); sh != 0 {
		t.Fatalf("stride 1<<%d on a still clock", sh)
	}
}

// A clock that steps back (a fake clock set back) after a fast burst:
// once it runs forward at a low rate again the stride returns to 1.
func TestStrideRecoversAfterTheClockStepsBack(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	c := newStrideClock(d)
	for range 500_000 {
		c.attempt(time.Microsecond, ms, false)
	}
	if d.shift.Load() == 0 {
		t.Fatal("no stride after the burst")
	}
	c.now = c.now.Add(-time.Hour)
	for range 100 {
		c.attempt(0, ms, false)
	}
	// Forward at ten a second: within an hour and a stride.
	n := 0
	for d.shift.Load() != 0 {
		c.attempt(100*ms, ms, false)
		n++
		if n > 40_000 {
			t.Fatalf("stride 1<<%d still after %d attempts at ten a second", d.shift.Load(), n)
		}
	}
}

// Huge counts and extreme spans make no stride beyond the cap, and none
// for a span not positive.
func TestStrideShiftExtremes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		held, attempts int64
		span           time.Duration
		want           int64
	}{
		{Window, 1 << 62, 1, maxShift},
		{Window, -1 << 62, RecomputeEvery, 0},
		{Window, 1 << 62, -time.Hour, 0},
		{Window, 1, 1 << 62, 0},
		{1 << 62, 1 << 40, time.Nanosecond, maxShift},
	} {
		if got := strideShift(c.held, c.attempts, c.span); got != c.want {
			t.Errorf("strideShift(%d, %d, %v) = %d; want %d", c.held, c.attempts, c.span, got, c.want)
		}
	}
}

// Many goroutines hammer one key at a stride while one reads the delay:
// no race, the quantile is always a latency that was recorded, and the
// stride stays within its bounds.
func TestStrideUnderConcurrentRecording(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Microsecond)
		return now
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := time.Duration(g+1) * ms
			for range 40_000 {
				end := tick()
				if d.Times() {
					d.Record(lat, false, end.Add(-lat))
				}
				if sh := d.shift.Load(); sh < 0 || sh > maxShift {
					t.Errorf("stride 1<<%d", sh)
					return
				}
			}
		}()
	}
	wg.Wait()
	q, ok := d.HedgeDelay(1, 0)
	if !ok || q < ms || q > 8*ms || q%ms != 0 {
		t.Fatalf("hedge quantile %v (%v); want one of the latencies recorded", q, ok)
	}
}

// At a steady rate, the stride set at a computation holds until the rate
// changes: a key ending a million attempts a second keeps timing one in
// 32 (never every one, which would have the window hold only its last
// 2 ms of traffic, nor one in 64), whatever came before the steady phase.
func TestStrideHoldsAtASteadyRate(t *testing.T) {
	t.Parallel()
	for rounds := range 6 {
		d := hedgeSet().Lookup("k")
		c := newStrideClock(d)
		// A history of fast and slow phases, then a slow one that leaves
		// the stride at 1.
		for range rounds {
			for range 300_000 {
				c.attempt(time.Microsecond, ms, false)
			}
			for range 3000 {
				c.attempt(ms, 7*ms, false)
			}
		}
		for range 3000 {
			c.attempt(ms, 7*ms, false)
		}
		lo, hi := int64(maxShift), int64(0)
		for i := range 1_000_000 {
			c.attempt(time.Microsecond, ms, false)
			if i >= 200_000 { // after two computations at the steady rate
				sh := d.shift.Load()
				lo, hi = min(lo, sh), max(hi, sh)
			}
		}
		if lo != 5 || hi != 5 {
			t.Errorf("after %d fast and slow rounds: at a steady million a second, the stride ranged over 1<<%d..1<<%d; want 1<<5 throughout", rounds, lo, hi)
		}
	}
}
