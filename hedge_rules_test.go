package httpretry

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func TestAfterAttempt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		f    hedgeFacts
		want hedgeAction
	}{
		{"a success wins over attempts in flight", hedgeFacts{stop: Final, inFlight: 2, mayStart: true}, hedgeWin},
		{"a final error wins too", hedgeFacts{stop: Final, inFlight: 1}, hedgeWin},
		{"the caller leaving ends it", hedgeFacts{stop: Canceled, inFlight: 2, mayStart: true}, hedgeWin},
		{"a 503 with others running starts the next at once", hedgeFacts{inFlight: 1, mayStart: true}, hedgeNow},
		{"a 503 when no more may start waits for the others", hedgeFacts{inFlight: 1}, hedgeKeep},
		{"a 409 in progress waits for the others", hedgeFacts{inFlight: 1, inProgress: true, mayStart: true}, hedgeKeep},
		{"attempts exhausted with others running waits", hedgeFacts{stop: AttemptsExhausted, inFlight: 1}, hedgeKeep},
		{"not repeatable with others running waits", hedgeFacts{stop: NotIdempotent, inFlight: 1, mayStart: true}, hedgeKeep},
		{"the last one, transient, retries", hedgeFacts{inFlight: 0, mayStart: true}, hedgeRetry},
		{"the last one, attempts exhausted, ends", hedgeFacts{stop: AttemptsExhausted}, hedgeWin},
		{"the last one, 409 in progress, retries after its wait", hedgeFacts{inProgress: true}, hedgeRetry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := afterAttempt(c.f); got != c.want {
				t.Errorf("afterAttempt(%+v) = %d; want %d", c.f, got, c.want)
			}
		})
	}
}

func TestMayStartHedge(t *testing.T) {
	t.Parallel()
	p := policy{maxAttempts: 3, minAttemptTime: 100 * ms}
	cases := []struct {
		name    string
		started int
		refused bool
		left    time.Duration
		bounded bool
		want    bool
	}{
		{"room for one more", 2, false, 0, false, true},
		{"max attempts started", 3, false, 0, false, false},
		{"a refusal stops hedging", 1, true, 0, false, false},
		{"MinAttemptTime left", 1, false, 100 * ms, true, true},
		{"less than MinAttemptTime left", 1, false, 99 * ms, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mayStartHedge(p, c.started, c.refused, c.left, c.bounded); got != c.want {
				t.Errorf("mayStartHedge = %v; want %v", got, c.want)
			}
		})
	}
}

func TestHedgeSafe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                                           string
		idempotent, keyed, byMethod, dedup, rewindable bool
		want                                           bool
	}{
		{"GET", true, false, true, false, true, true},
		{"GET with a key", true, true, true, false, true, true},
		{"POST marked idempotent", true, false, true, false, true, true},
		{"POST with a key", true, true, false, false, true, false},
		{"POST with a key, server deduplicates", true, true, false, true, true, true},
		{"POST without a key", false, false, false, true, true, false},
		{"POST declared idempotent by Transport.Idempotent", true, false, false, false, true, true},
		{"GET whose body cannot be rewound", true, false, true, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := hedgeSafe(c.idempotent, c.keyed, c.byMethod, c.dedup, c.rewindable); got != c.want {
				t.Errorf("hedgeSafe = %v; want %v", got, c.want)
			}
		})
	}
}

func TestLatencySample(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                     string
		answered, timedOut       bool
		wantRecord, wantCensored bool
	}{
		{"an answer", true, false, true, false},
		{"cut by its limit: at least that long", false, true, true, true},
		{"a fast failure is excluded", false, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, cen := latencySample(c.answered, c.timedOut)
			if rec != c.wantRecord || cen != c.wantCensored {
				t.Errorf("latencySample = %v, %v; want %v, %v", rec, cen, c.wantRecord, c.wantCensored)
			}
		})
	}
}

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
	tr := &Transport{Hedging: &Hedging{}}
	s := tr.latencies()
	d := s.lookup("k")
	for range latencyWindow {
		d.record(s, 5*ms, false)
	}
	if got, _ := d.hedgeDelay(tr.Hedging); got != 5*ms {
		t.Fatalf("delay = %v; want 5ms", got)
	}
	for range latencyWindow {
		d.record(s, 50*ms, false)
	}
	if got, _ := d.hedgeDelay(tr.Hedging); got != 50*ms {
		t.Errorf("delay after the shift = %v; want 50ms", got)
	}
}

// TestLatencyKeysBounded: past MaxKeys, keys share one distribution.
func TestLatencyKeysBounded(t *testing.T) {
	t.Parallel()
	tr := &Transport{Hedging: &Hedging{MaxKeys: 2}}
	s := tr.latencies()
	a, b, c, d := s.lookup("a"), s.lookup("b"), s.lookup("c"), s.lookup("d")
	if a == b || c != d || c == a || c == b || s.lookup("a") != a {
		t.Error("want a and b their own, c and d sharing one")
	}
	if len(s.keys) != 2 {
		t.Errorf("keys = %d; want 2", len(s.keys))
	}
	// Reading a key's delay adds no key.
	tr2 := &Transport{Hedging: &Hedging{}}
	for i := range 100 {
		tr2.HedgeDelay(fmt.Sprint("k", i))
	}
	if n := len(tr2.latencies().keys); n != 0 {
		t.Errorf("HedgeDelay added %d keys; want 0", n)
	}
}

// TestExtraLoadCap: the cap starts with a burst of 10 hedges and then
// admits MaxExtraLoad of a hedge per operation.
func TestExtraLoadCap(t *testing.T) {
	t.Parallel()
	d := newLatencyDist()
	n := 0
	for d.withdrawExtra() {
		n++
	}
	if n != hedgeBurst {
		t.Fatalf("burst = %d; want %d", n, hedgeBurst)
	}
	for range 100 {
		d.depositExtra(0.02)
	}
	n = 0
	for d.withdrawExtra() {
		n++
	}
	if n != 2 {
		t.Errorf("after 100 operations at 2%%: %d hedges; want 2", n)
	}
}

func TestLearnedLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		l    LearnedTimeout
		q    time.Duration
		want time.Duration
	}{
		{"p99.9 of 140ms makes 182ms", LearnedTimeout{}, 140 * ms, 182 * ms},
		{"the floor", LearnedTimeout{}, time.Millisecond, DefaultLearnedMin},
		{"the ceiling", LearnedTimeout{Max: 150 * ms}, 140 * ms, 150 * ms},
		{"a factor of 2", LearnedTimeout{Factor: 2}, 100 * ms, 200 * ms},
		{"no overflow", LearnedTimeout{Factor: 10}, time.Duration(math.MaxInt64 / 2), time.Duration(math.MaxInt64)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := learnedLimit(&c.l, c.q); got != c.want {
				t.Errorf("learnedLimit = %v; want %v", got, c.want)
			}
		})
	}
}

// TestOffsetStable pins Offset's values: they must never change between
// releases, runs or processes, or scheduled work would move.
func TestOffsetStable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		identity string
		period   time.Duration
		want     time.Duration
	}{
		{"", time.Hour, 3372370014205},
		{"pod-1", time.Hour, 3216014035593},
		{"pod-2", time.Hour, 3231340545256},
		{"pod-3", time.Hour, 2170836015480},
		{"worker.eu-west-1.example", 24 * time.Hour, 5273202547859},
		{"pod-1", 0, 0},
		{"pod-1", -time.Second, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%v", c.identity, c.period), func(t *testing.T) {
			got := Offset(c.identity, c.period)
			if got != c.want {
				t.Errorf("Offset(%q, %v) = %d; want %d", c.identity, c.period, got, c.want)
			}
			if c.period > 0 && (got < 0 || got >= c.period) {
				t.Errorf("Offset(%q, %v) = %v; outside [0, period)", c.identity, c.period, got)
			}
		})
	}
}

// TestOffsetUniform: 100,000 identities that differ only in a counter
// spread over 100 equal slots of the period within a chi-squared bound
// (99 degrees of freedom; 150 is beyond the 99.9th percentile of the
// distribution, about 148), and cover the period's ends.
func TestOffsetUniform(t *testing.T) {
	t.Parallel()
	const n, slots = 100_000, 100
	period := time.Minute
	var counts [slots]int
	lo, hi := period, time.Duration(0)
	for i := range n {
		o := Offset(fmt.Sprintf("pod-%d", i), period)
		if o < 0 || o >= period {
			t.Fatalf("offset %v outside [0, %v)", o, period)
		}
		counts[int(o*slots/period)]++
		lo, hi = min(lo, o), max(hi, o)
	}
	expect := float64(n) / slots
	chi := 0.0
	for _, c := range counts {
		chi += (float64(c) - expect) * (float64(c) - expect) / expect
	}
	if chi > 150 {
		t.Errorf("chi-squared = %.1f over %d slots; want ≤ 150 (counts %v)", chi, slots, counts)
	}
	if lo > period/1000 || hi < period-period/1000 {
		t.Errorf("offsets span [%v, %v]; want close to [0, %v)", lo, hi, period)
	}
}
