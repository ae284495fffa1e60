package main

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

const msec = time.Millisecond

func TestRankNearest(t *testing.T) {
	t.Parallel()
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(i+1) * msec
	}
	for _, c := range []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"median", 0.5, 500 * msec},
		{"p99", 0.99, 990 * msec},
		{"p99.9", 0.999, 999 * msec},
		{"max", 1, 1000 * msec},
		{"below the first", 0, 1 * msec},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := rank(d, c.q); got != c.want {
				t.Errorf("rank(1..1000 ms, %v) = %v, want %v", c.q, got, c.want)
			}
		})
	}
	if got := rank(nil, 0.5); got != 0 {
		t.Errorf("rank(nil) = %v, want 0", got)
	}
}

func TestHedgeRunSummary(t *testing.T) {
	t.Parallel()
	// 1000 operations: 990 at 5 ms, 10 at 1 s; 1013 server requests.
	r := &hedgeRun{policy: hedgePolicy{key: "adaptive", name: "httpretry adaptive"}, ops: 1000, hits: 1013, canceled: 11, conns: 7, failed: 2}
	for i := range 1000 {
		d := 5 * msec
		if i%100 == 0 {
			d = time.Second
		}
		r.lat = append(r.lat, d)
	}
	got := r.summary()
	if got.n != 1000 || got.p50 != 5*msec || got.p99 != 5*msec || got.p999 != time.Second || got.max != time.Second {
		t.Errorf("quantiles n=%d p50=%v p99=%v p99.9=%v max=%v, want 1000 5ms 5ms 1s 1s", got.n, got.p50, got.p99, got.p999, got.max)
	}
	if got.extra < 1.299 || got.extra > 1.301 {
		t.Errorf("extra = %v%%, want 1.3%%", got.extra)
	}
	if got.canceled != 11 || got.conns != 7 || got.failed != 2 || got.hits != 1013 || got.label != "httpretry adaptive" {
		t.Errorf("counts %+v, want canceled 11, conns 7, failed 2, hits 1013", got)
	}
	if r.lat[0] != time.Second {
		t.Errorf("summary sorted the run's latencies in place")
	}
}

func TestBestFixedAtTheSamePrice(t *testing.T) {
	t.Parallel()
	fixed := []tail{
		{p999: 8 * msec, extra: 40},   // 5 ms: hedges half the requests
		{p999: 15 * msec, extra: 1.8}, // 10 ms
		{p999: 25 * msec, extra: 1.2}, // 20 ms
		{p999: 15 * msec, extra: 1.1}, // a tie at p99.9: the first stays
	}
	for _, c := range []struct {
		name     string
		maxExtra float64
		want     int
	}{
		{"the cheap tail wins within the price", 2, 1},
		{"any price: the shortest tail", 100, 0},
		{"nothing that cheap", 1, -1},
		{"only the dearer ones left out", 1.5, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := bestFixed(fixed, c.maxExtra); got != c.want {
				t.Errorf("bestFixed(maxExtra %v) = %d, want %d", c.maxExtra, got, c.want)
			}
		})
	}
}

func TestConvergence(t *testing.T) {
	t.Parallel()
	step := 100 * msec
	// 10 samples at 6 ms before the shift at 1 s, then the given ones.
	series := func(after ...time.Duration) []time.Duration {
		d := make([]time.Duration, 10)
		for i := range d {
			d[i] = 6 * msec
		}
		return append(d, after...)
	}
	repeat := func(v time.Duration, n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	for _, c := range []struct {
		name        string
		delays      []time.Duration
		wantAfter   time.Duration
		wantSettled time.Duration
		wantOK      bool
	}{
		{"follows at once", series(repeat(55*msec, 30)...), 0, 55 * msec, true},
		{"three samples late", series(append([]time.Duration{6 * msec, 20 * msec, 40 * msec}, repeat(55*msec, 30)...)...), 300 * msec, 55 * msec, true},
		{"within the tolerance counts", series(append([]time.Duration{6 * msec, 45 * msec}, repeat(55*msec, 30)...)...), 100 * msec, 55 * msec, true},
		{"a late excursion restarts the clock", series(append(append(repeat(55*msec, 10), 6*msec), repeat(55*msec, 30)...)...), 1100 * msec, 55 * msec, true},
		{"never moved: settled, at once", series(repeat(6*msec, 30)...), 0, 6 * msec, true},
		{"too few samples after the shift", series(repeat(55*msec, 5)...), 0, 0, false},
		{"no delay known", series(repeat(0, 30)...), 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			after, settled, ok := convergence(c.delays, step, time.Second, 0.2, 20)
			if after != c.wantAfter || settled != c.wantSettled || ok != c.wantOK {
				t.Errorf("convergence = %v, %v, %v; want %v, %v, %v", after, settled, ok, c.wantAfter, c.wantSettled, c.wantOK)
			}
		})
	}
}

func TestTargetLines(t *testing.T) {
	t.Parallel()
	single := tail{p50: 5 * msec, p99: 1001 * msec, p999: 1003 * msec, hits: 4000, label: "single attempt"}
	adaptive := tail{p50: 5100 * time.Microsecond, p99: 9 * msec, p999: 14 * msec, extra: 1.3, hits: 4052}
	failsafe := tail{p999: 20 * msec, extra: 5, label: "failsafe-go hedgepolicy"}
	hedged := tail{p999: 30 * msec, extra: 2.8, label: "cristalhq/hedgedhttp"}
	for _, c := range []struct {
		name, got, want string
	}{
		{
			"independent met",
			independentLine(single, adaptive, []tail{failsafe, hedged}),
			"hedging: independent p99.9 single 1003 ms, adaptive 14 ms (72x), extra 1.3%, p50 +2%, best peer failsafe-go hedgepolicy p99.9 20 ms at extra 5.0%; target met",
		},
		{
			"independent: a peer as cheap with a shorter tail",
			independentLine(single, adaptive, []tail{{p999: 12 * msec, extra: 1.0, label: "p"}}),
			"hedging: independent p99.9 single 1003 ms, adaptive 14 ms (72x), extra 1.3%, p50 +2%, best peer p p99.9 12 ms at extra 1.0%; target NOT met",
		},
		{
			"independent: too dear",
			independentLine(single, tail{p50: 5 * msec, p999: 14 * msec, extra: 2.5}, nil),
			"hedging: independent p99.9 single 1003 ms, adaptive 14 ms (72x), extra 2.5%, p50 +0%; target NOT met",
		},
		{
			"independent: a median a hair faster is +0%",
			independentLine(single, tail{p50: 4990 * time.Microsecond, p999: 14 * msec, extra: 1}, nil),
			"hedging: independent p99.9 single 1003 ms, adaptive 14 ms (72x), extra 1.0%, p50 +0%; target met",
		},
		{
			"independent: median too slow",
			independentLine(single, tail{p50: 5300 * time.Microsecond, p999: 14 * msec, extra: 1}, nil),
			"hedging: independent p99.9 single 1003 ms, adaptive 14 ms (72x), extra 1.0%, p50 +6%; target NOT met",
		},
		{
			"correlated met",
			correlatedLine(tail{p99: 315 * msec, hits: 4000}, tail{p99: 312 * msec, hits: 4160}),
			"hedging: correlated load 1.04x, p99 312 ms (no hedging 315 ms); target met",
		},
		{
			"correlated: too much load",
			correlatedLine(tail{p99: 315 * msec, hits: 4000}, tail{p99: 312 * msec, hits: 4480}),
			"hedging: correlated load 1.12x, p99 312 ms (no hedging 315 ms); target NOT met",
		},
		{
			"correlated: a longer p99",
			correlatedLine(tail{p99: 315 * msec, hits: 4000}, tail{p99: 322 * msec, hits: 4000}),
			"hedging: correlated load 1.00x, p99 322 ms (no hedging 315 ms); target NOT met",
		},
		{
			"correlated: the same p99 within the timers' resolution",
			correlatedLine(tail{p99: 304 * msec, hits: 4000}, tail{p99: 304500 * time.Microsecond, hits: 4000}),
			"hedging: correlated load 1.00x, p99 304 ms (no hedging 304 ms); target met",
		},
		{
			"zero-config met",
			zeroConfigLine(tail{p999: 14 * msec}, tail{p999: 13200 * time.Microsecond, extra: 1.9}, 10*msec, 2300*msec, 55*msec, true),
			"hedging: zero-config within 6% of best fixed (adaptive p99.9 14 ms, fixed 10 ms 13 ms at extra 1.9%), re-converged 2.3 s after 5 ms -> 50 ms (delay 55 ms); target met",
		},
		{
			"zero-config: better than the best fixed",
			zeroConfigLine(tail{p999: 12 * msec}, tail{p999: 13 * msec, extra: 1.9}, 10*msec, 0, 55*msec, true),
			"hedging: zero-config within 0% of best fixed (adaptive p99.9 12 ms, fixed 10 ms 13 ms at extra 1.9%), re-converged 0.0 s after 5 ms -> 50 ms (delay 55 ms); target met",
		},
		{
			"zero-config: slow to follow",
			zeroConfigLine(tail{p999: 14 * msec}, tail{p999: 14 * msec}, 10*msec, 11*time.Second, 55*msec, true),
			"hedging: zero-config within 0% of best fixed (adaptive p99.9 14 ms, fixed 10 ms 14 ms at extra 0.0%), re-converged 11.0 s after 5 ms -> 50 ms (delay 55 ms); target NOT met",
		},
		{
			"zero-config: never settled",
			zeroConfigLine(tail{p999: 14 * msec}, tail{p999: 14 * msec}, 10*msec, 0, 0, false),
			"hedging: zero-config within 0% of best fixed (adaptive p99.9 14 ms, fixed 10 ms 14 ms at extra 0.0%), re-converged did not settle after 5 ms -> 50 ms (delay 0.0 ms); target NOT met",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got\n%s\nwant\n%s", c.got, c.want)
			}
		})
	}
}

func TestHedgingRequested(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-scenarios", "hedging"}, true},
		{[]string{"-short", "--scenarios=hedging"}, true},
		{[]string{"-scenarios", "outage,hedging"}, false},
		{[]string{"-scenarios", "outage"}, false},
		{nil, false},
	} {
		if got := hedgingRequested(c.args); got != c.want {
			t.Errorf("hedgingRequested(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestParseHedgeFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseHedgeFlags([]string{"-scenarios", "hedging", "-short", "-sweep", "5ms, 20ms", "-out", ""}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 4*time.Second || cfg.rate != 200 || len(cfg.sweep) != 2 || cfg.sweep[1] != 20*msec || cfg.out != "" || cfg.fixed != 10*msec {
		t.Errorf("cfg = %+v", cfg)
	}
	var errs strings.Builder
	for _, bad := range [][]string{{"-sweep", "5ms,x"}, {"-duration", "1s"}, {"-slots", "0"}} {
		if _, err := parseHedgeFlags(bad, &errs); err == nil {
			t.Errorf("parseHedgeFlags(%q): no error", bad)
		}
	}
}

func TestProfiles(t *testing.T) {
	t.Parallel()
	indep := independentProfile(5*msec, time.Second, 0.01)
	if d, q := indep(0, 0.0099); d != time.Second || q {
		t.Errorf("independent slow draw = %v, %v; want 1s, not queued", d, q)
	}
	if d, _ := indep(0, 0.01); d != 5*msec {
		t.Errorf("independent fast draw = %v, want 5ms", d)
	}
	shift := shiftProfile(10*time.Second, 5*msec, 50*msec, time.Second, 0.01)
	if d, _ := shift(9*time.Second, 0.5); d != 5*msec {
		t.Errorf("before the shift = %v, want 5ms", d)
	}
	if d, _ := shift(10*time.Second, 0.5); d != 50*msec {
		t.Errorf("after the shift = %v, want 50ms", d)
	}
	corr := correlatedProfile(5*msec, 300*msec, 5*time.Second, 10*time.Second, 36*msec)
	for _, c := range []struct {
		at     time.Duration
		u      float64
		want   time.Duration
		queued bool
	}{
		{0, 0.001, 5 * msec, false},
		{5 * time.Second, 0.99, 300 * msec, false},
		{10 * time.Second, 0, 0, true},
		// The exponential's median: mean × ln 2.
		{10 * time.Second, 0.5, time.Duration(-math.Log1p(-0.5) * float64(36*msec)), true},
	} {
		if d, q := corr(c.at, c.u); d != c.want || q != c.queued {
			t.Errorf("correlated(%v, %v) = %v, %v; want %v, %v", c.at, c.u, d, q, c.want, c.queued)
		}
	}
}

func TestServerDrawsSameForEveryRun(t *testing.T) {
	t.Parallel()
	a := &hedgeServer{seed: 1}
	b := &hedgeServer{seed: 1}
	slow := 0
	for op := range 20000 {
		if a.draw(op, 0) != b.draw(op, 0) {
			t.Fatalf("draw(%d, 0) differs between two servers of one seed", op)
		}
		if a.draw(op, 0) == a.draw(op, 1) {
			t.Fatalf("draw(%d, 0) == draw(%d, 1): a hedge meets its first attempt's latency", op, op)
		}
		if a.draw(op, 0) < 0.01 {
			slow++
		}
	}
	// 1% of 20000, within five standard deviations (√198 ≈ 14).
	if slow < 130 || slow > 270 {
		t.Errorf("%d of 20000 first attempts slow, want about 200", slow)
	}
}
