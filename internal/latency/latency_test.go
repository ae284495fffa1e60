package latency

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
)

const ms = time.Millisecond

// hedgeSet is a set as a Transport with Hedging's defaults makes it.
func hedgeSet() *Set { return New(Config{HedgeQuantile: 0.98, MaxKeys: 32, Burst: 10}) }

// samples builds sorted samples: answers of the given durations (ms) and
// censored ones.
func samples(answers, censored []int) []uint64 {
	var s []uint64
	for _, a := range answers {
		s = append(s, sample(time.Duration(a)*ms, false))
	}
	for _, c := range censored {
		s = append(s, sample(time.Duration(c)*ms, true))
	}
	slices.Sort(s)
	return s
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestKMQuantile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		samples []uint64
		q       float64
		want    time.Duration
	}{
		{"no samples", nil, 0.95, 0},
		{"uncensored: the empirical quantile", samples(seq(1, 100), nil), 0.95, 95 * ms},
		{"uncensored median", samples(seq(1, 100), nil), 0.5, 50 * ms},
		// Ten losers canceled at 5ms are at least 5ms: counting them as
		// answers would make the median 45ms; dropping them, 50ms;
		// Kaplan–Meier spreads their mass over the longer answers: 51ms.
		{"losers canceled early do not pull the estimate down", samples(seq(1, 100), []int{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}), 0.5, 51 * ms},
		{"censored above every answer: at least the largest sample",
			samples([]int{1, 2}, []int{50, 60}), 0.95, 60 * ms},
		// The censored 10ms sample is at risk at 10ms (an answer comes
		// first at equal times), then leaves: 1/3 answered by 10ms, all by
		// 20ms.
		{"an answer and a censored sample of the same duration",
			samples([]int{10, 20}, []int{10}), 0.5, 20 * ms},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := kmQuantile(c.samples, c.q); got != c.want {
				t.Errorf("kmQuantile = %v; want %v", got, c.want)
			}
		})
	}
}

// TestLatencyWindowForgetsOldSamples: the window keeps the latest 2048
// latencies, so after a shift from 5ms to 50ms the delay follows within a
// window's worth of requests.
func TestLatencyWindowForgetsOldSamples(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	start := time.Time{}
	for range Window {
		start = start.Add(ms)
		d.Record(5*ms, false, start)
	}
	if got, _ := d.HedgeDelay(100, ms); got != 5*ms {
		t.Fatalf("delay = %v; want 5ms", got)
	}
	for range Window {
		start = start.Add(ms)
		d.Record(50*ms, false, start)
	}
	if got, _ := d.HedgeDelay(100, ms); got != 50*ms {
		t.Errorf("delay after the shift = %v; want 50ms", got)
	}
}

// TestLatencyHedgeDelayWaitsForMinSamplesAndKeepsItsFloor: no delay until
// minSamples latencies are held; then the quantile, never below the
// floor.
func TestLatencyHedgeDelayWaitsForMinSamplesAndKeepsItsFloor(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	for range 99 {
		d.Record(100*time.Microsecond, false, time.Time{})
	}
	if got, ok := d.HedgeDelay(100, ms); ok || got != 0 {
		t.Fatalf("after 99 latencies: %v, %v; want 0, false", got, ok)
	}
	d.Record(100*time.Microsecond, false, time.Time{})
	if got, ok := d.HedgeDelay(100, ms); !ok || got != ms {
		t.Errorf("after 100 latencies of 100µs: %v, %v; want the 1ms floor, true", got, ok)
	}
}

// TestLatencyKeysEvictedByCLOCK: past MaxKeys, a new key evicts one not
// looked up since the hand last passed it, and starts with no latencies;
// a key in steady use keeps its own; Find adds no key.
func TestLatencyKeysEvictedByCLOCK(t *testing.T) {
	t.Parallel()
	s := New(Config{HedgeQuantile: 0.98, MaxKeys: 2, Burst: 10})
	hot := s.Lookup("hot")
	hot.Record(5*ms, false, time.Time{})
	for i := range 20 {
		s.Lookup(fmt.Sprint("k", i)).Record(ms, false, time.Time{})
		if s.Lookup("hot") != hot {
			t.Fatalf("after %d other keys, hot was evicted", i+1)
		}
		if n := s.Len(); n > 2 {
			t.Fatalf("%d keys held; want at most 2", n)
		}
	}
	if s.Find("k0") != nil {
		t.Error("k0, not looked up since it was added, is still held")
	}
	if got := hot.held(); got != 1 {
		t.Errorf("hot holds %d latencies; want its own 1", got)
	}
	for i := range 100 {
		s.Find(fmt.Sprint("never", i))
	}
	if n := s.Len(); n != 2 {
		t.Errorf("Find added keys: %d held; want 2", n)
	}
}

// TestExtraLoadCap: the cap starts with a burst of Burst hedges and then
// admits the share deposited per operation, never more than Burst.
func TestExtraLoadCap(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	n := 0
	for d.WithdrawExtra() {
		n++
	}
	if n != 10 {
		t.Fatalf("burst = %d; want 10", n)
	}
	for range 100 {
		d.DepositExtra(0.02)
	}
	n = 0
	for d.WithdrawExtra() {
		n++
	}
	if n != 2 {
		t.Errorf("after 100 operations at 2%%: %d hedges; want 2", n)
	}
	for range 50 {
		d.RefundExtra()
	}
	n = 0
	for d.WithdrawExtra() {
		n++
	}
	if n != 10 {
		t.Errorf("after 50 refunds: %d hedges; want the burst of 10", n)
	}
}

func TestLearnedLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		l    Learn
		q    time.Duration
		want time.Duration
	}{
		{"p99.9 of 140ms makes 182ms", Learn{Factor: 1.3, Min: 10 * ms}, 140 * ms, 182 * ms},
		{"the floor", Learn{Factor: 1.3, Min: 10 * ms}, time.Millisecond, 10 * ms},
		{"the ceiling", Learn{Factor: 1.3, Min: 10 * ms, Max: 150 * ms}, 140 * ms, 150 * ms},
		{"a factor of 2", Learn{Factor: 2, Min: 10 * ms}, 100 * ms, 200 * ms},
		{"no overflow", Learn{Factor: 10}, time.Duration(math.MaxInt64 / 2), time.Duration(math.MaxInt64)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := learnedLimit(&c.l, c.q); got != c.want {
				t.Errorf("learnedLimit = %v; want %v", got, c.want)
			}
		})
	}
}

// TestLookupHostIsLookupOfTheHostKey: a request's host finds the
// latencies kept under its canonical key, whatever its spelling.
func TestLookupHostIsLookupOfTheHostKey(t *testing.T) {
	s := New(Config{MaxKeys: 4})
	for _, u := range []string{"http://API.test:80/x", "http://api.test/y", "HTTP://api.test./"} {
		req, _ := http.NewRequest("GET", u, nil)
		if got, want := s.LookupHost(req), s.Lookup(desttable.HostKey(req)); got != want {
			t.Errorf("%s: LookupHost and Lookup(HostKey) differ", u)
		}
	}
	if s.Len() != 1 {
		t.Errorf("%d keys held for three spellings of one host; want 1", s.Len())
	}
}

// TestRecomputeDue: the quantiles are recomputed after every sample while
// fewer than 16 are held, after every n/16 until the window is full, then
// after every 128 but no sooner than RecomputeEvery after the last time.
func TestRecomputeDue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n, fresh  int
		sinceLast time.Duration
		want      bool
	}{
		{1, 1, 0, true},
		{15, 1, 0, true},
		{32, 1, 0, false},
		{32, 2, 0, true},
		{Window - 1, (Window-1)/16 - 1, time.Hour, false},
		{Window - 1, (Window - 1) / 16, 0, true},
		{Window, 127, time.Hour, false},
		{Window, 128, RecomputeEvery - 1, false},
		{Window, 128, RecomputeEvery, true},
		{Window, Window, RecomputeEvery - 1, false},
		{Window, 128, -time.Second, false},
	}
	for _, c := range cases {
		if got := recomputeDue(c.n, c.fresh, c.sinceLast); got != c.want {
			t.Errorf("recomputeDue(%d held, %d fresh, %v since) = %v; want %v", c.n, c.fresh, c.sinceLast, got, c.want)
		}
	}
}

// TestLatencyFullWindowFollowsAShiftAtAnyRate: a full window whose
// latencies shift from 5ms to 50ms for a window's worth of samples and
// RecomputeEvery follows the shift, whether the samples come at a
// thousand a second (recomputed after every 128) or at a million
// (recomputed every RecomputeEvery of the samples' end times); at a
// million a second it is not recomputed within RecomputeEvery.
func TestLatencyFullWindowFollowsAShiftAtAnyRate(t *testing.T) {
	t.Parallel()
	for _, step := range []time.Duration{ms, time.Microsecond} {
		d := hedgeSet().Lookup("k")
		end := time.Time{}
		record := func(lat time.Duration, n int) {
			for range n {
				end = end.Add(step)
				d.Record(lat, false, end)
			}
		}
		record(5*ms, 2*Window)
		if step == time.Microsecond {
			record(50*ms, Window)
			if got, _ := d.HedgeDelay(100, ms); got != 5*ms {
				t.Errorf("a sample every µs: delay %v after %v of new samples; want 5ms until RecomputeEvery", got, Window*step)
			}
		}
		record(50*ms, Window+int(RecomputeEvery/step))
		if got, _ := d.HedgeDelay(100, ms); got != 50*ms {
			t.Errorf("a sample every %v: delay after the shift = %v; want 50ms", step, got)
		}
	}
}

// TestLatencySlotNotWrittenYetIsNoSample: Record takes a sample's slot
// before it writes the sample in it, and takes no lock: a Record on
// another goroutine that computes the quantiles in between leaves that
// slot out, rather than count it as an answer of no time at all, which
// would pull the hedge delay down.
func TestLatencySlotNotWrittenYetIsNoSample(t *testing.T) {
	t.Parallel()
	d := New(Config{HedgeQuantile: 0.25, MaxKeys: 1, Burst: 1}).Lookup("k")
	d.recorded.Add(1) // a Record that took the first slot and has not written it yet
	for range 3 {
		d.Record(10*ms, false, time.Time{})
	}
	if got, _ := d.HedgeDelay(1, 0); got != 10*ms {
		t.Errorf("hedge delay %v after three answers of 10ms; want 10ms, the slot not written left out", got)
	}
}

// TestLatencyNoHedgeDelayBeforeAQuantileIsComputed: samples whose slots
// are taken but not written yet count toward minSamples, but until a
// quantile was computed from written ones there is no delay to hedge at:
// not the floor.
func TestLatencyNoHedgeDelayBeforeAQuantileIsComputed(t *testing.T) {
	t.Parallel()
	d := New(Config{HedgeQuantile: 0.5, MaxKeys: 1, Burst: 1}).Lookup("k")
	d.recorded.Add(2) // two Records that took their slots and have not written them yet
	if got, ok := d.HedgeDelay(2, ms); ok {
		t.Errorf("HedgeDelay = %v, true before any quantile was computed; want none", got)
	}
	d.Record(0, false, time.Time{}) // an answer of no measurable time is a quantile of 0
	if got, ok := d.HedgeDelay(2, ms); !ok || got != ms {
		t.Errorf("HedgeDelay = %v, %v after a quantile of 0; want the 1ms floor, true", got, ok)
	}
}

// TestLatencyRecordWithoutAStartEndedNow: a full window of 5ms latencies
// that ended an hour ago, then a window of 50ms latencies recorded with
// no start (the caller read only their duration): each of those ended
// now, more than RecomputeEvery after the last computation, so the
// quantiles are computed again and the delay follows them to 50ms.
func TestLatencyRecordWithoutAStartEndedNow(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	start := time.Now().Add(-time.Hour)
	for range Window {
		start = start.Add(time.Microsecond)
		d.Record(5*ms, false, start)
	}
	if got, _ := d.HedgeDelay(100, ms); got != 5*ms {
		t.Fatalf("delay = %v; want 5ms", got)
	}
	for range Window {
		d.Record(50*ms, false, time.Time{})
	}
	if got, _ := d.HedgeDelay(100, ms); got != 50*ms {
		t.Errorf("delay after a window of 50ms latencies without a start = %v; want 50ms", got)
	}
}

// TestDistThatDerivesNothingKeepsNoLatencies: a Dist with neither a hedge
// quantile nor a learned limit says it derives nothing, and keeps none
// of the latencies recorded; one with either keeps them.
func TestDistThatDerivesNothingKeepsNoLatencies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want int64
	}{
		{"nothing", Config{MaxKeys: 1}, 0},
		{"hedge quantile", Config{HedgeQuantile: 0.98, MaxKeys: 1}, 3},
		{"learned limit", Config{Learn: &Learn{Quantile: 0.99, Factor: 2}, MaxKeys: 1}, 3},
	} {
		d := New(tc.cfg).Lookup("k")
		if got := d.Derives(); got != (tc.want > 0) {
			t.Errorf("%s: Derives() = %v", tc.name, got)
		}
		for range 3 {
			d.Record(time.Millisecond, false, time.Time{})
		}
		if got := d.Held(); got != tc.want {
			t.Errorf("%s: %d latencies held after 3; want %d", tc.name, got, tc.want)
		}
	}
}

// strideShift times every attempt until the window is full, and while
// fewer than 2 × Window would end between two computations; above, one in
// the least power of two that brings them under, at most 1<<maxShift.
func TestStrideShift(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		held, attempts int64
		span           time.Duration
		want           int64
	}{
		{"window not full", Window - 1, 1e9, RecomputeEvery, 0},
		{"no time passed", Window, 1e9, 0, 0},
		{"just under 2 × Window per computation", Window, 2*Window - 1, RecomputeEvery, 0},
		{"2 × Window per computation", Window, 2 * Window, RecomputeEvery, 1},
		{"as fast, over twice the span", Window, 4 * Window, 2 * RecomputeEvery, 1},
		{"just under 4 × Window", Window, 4*Window - 1, RecomputeEvery, 1},
		{"4 × Window", Window, 4 * Window, RecomputeEvery, 2},
		{"a million a second", Window, 1e6, time.Second, 5},
		{"capped", Window, 1e12, time.Second, maxShift},
	} {
		if got := strideShift(c.held, c.attempts, c.span); got != c.want {
			t.Errorf("%s: strideShift(%d, %d, %v) = %d; want %d", c.name, c.held, c.attempts, c.span, got, c.want)
		}
	}
}

// At a million attempts a second, once the window is full, one attempt in
// each block of 32 is timed: the window's 2048 latencies then span
// about 65 ms of traffic, not the last 2. When attempts come ten a second
// again, every one is timed once a timed one has seen RecomputeEvery
// pass: within a stride of attempts.
func TestTimesOneInTheStrideWhileAttemptsComeFast(t *testing.T) {
	t.Parallel()
	d := hedgeSet().Lookup("k")
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	attempt := func(gap time.Duration) bool {
		now = now.Add(gap)
		if !d.Times() {
			return false
		}
		d.Record(ms, false, now.Add(-ms))
		return true
	}
	for range 1_000_000 {
		attempt(time.Microsecond)
	}
	if sh := d.shift.Load(); sh != 5 {
		t.Fatalf("stride 1<<%d after a second at a million a second; want 1<<5", sh)
	}
	timed := 0
	for range 32 * 100 {
		if attempt(time.Microsecond) {
			timed++
		}
	}
	if timed < 99 || timed > 101 {
		t.Fatalf("%d of 3200 attempts timed; want 100 ± 1, one in each block of 32 (the first and last blocks cut)", timed)
	}
	for i := range 64 {
		timed := attempt(100 * ms)
		if i >= 32 && !timed {
			t.Fatalf("attempt %d at ten a second not timed; want every one after the first stride", i)
		}
	}
	if sh := d.shift.Load(); sh != 0 {
		t.Fatalf("stride 1<<%d at ten a second; want every attempt", sh)
	}
}

// A Dist that derives nothing times nothing.
func TestTimesNothingForADistThatDerivesNothing(t *testing.T) {
	t.Parallel()
	if New(Config{MaxKeys: 1, Burst: 1}).Lookup("k").Times() {
		t.Fatal("Times of a Dist that derives nothing = true")
	}
}
