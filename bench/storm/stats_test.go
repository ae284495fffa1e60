package main

import (
	"math"
	"testing"
	"time"
)

func TestRecoveryTime(t *testing.T) {
	t.Parallel()
	flat := func(n int, v int64) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	// 30 buckets: 10 healthy, 10 outage, 10 recovery; 20 arrivals each.
	arrived := flat(30, 20)
	with := func(good []int64, at map[int]int64) []int64 {
		g := append([]int64(nil), good...)
		for i, v := range at {
			g[i] = v
		}
		return g
	}
	base := with(flat(30, 20), map[int]int64{10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0, 17: 0, 18: 0, 19: 0})
	end := 2 * time.Second
	tests := []struct {
		name    string
		good    []int64
		arrived []int64
		end     time.Duration
		want    time.Duration
		ok      bool
	}{
		{"immediate", base, arrived, end, 0, true},
		{"first bucket short but window enough", with(base, map[int]int64{20: 12}), arrived, end, 0, true},
		{"three slow buckets", with(base, map[int]int64{20: 0, 21: 0, 22: 5}), arrived, end, 300 * time.Millisecond, true},
		{"exactly 90%", with(base, map[int]int64{20: 10, 21: 20, 22: 20, 23: 20, 24: 20}), arrived, end, 0, true},
		{"just under 90%", with(base, map[int]int64{20: 9, 21: 0, 22: 20, 23: 20, 24: 20, 25: 20, 26: 20}), arrived, end, 200 * time.Millisecond, true},
		{"never", with(base, map[int]int64{20: 0, 21: 0, 22: 0, 23: 0, 24: 0, 25: 0, 26: 0}), arrived, end, 0, false},
		// 40 successes in the first window of 60 arrivals is 67% of a
		// fixed rate of 20 per bucket, but all that arrived.
		{"quiet arrivals are not a slow recovery", with(base, map[int]int64{20: 0, 21: 10, 22: 10}), with(arrived, map[int]int64{20: 0, 21: 10, 22: 10}), end, 0, true},
		{"end inside a bucket starts at the next", base, arrived, end - 50*time.Millisecond, 50 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := recoveryTime(tt.good, tt.arrived, tt.end, 1, 0.9, 5)
			if got != tt.want || ok != tt.ok {
				t.Errorf("recoveryTime = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestRunRecoveryAndPhases checks phaseStats and recovery on a
// synthetic run: the accounting of ops, hits, amplification, goodput,
// failures and connections by phase.
func TestRunRecoveryAndPhases(t *testing.T) {
	t.Parallel()
	phases := []phase{{name: "healthy", dur: time.Second}, {name: "outage", dur: time.Second, mode: outage}, {name: "recovery", dur: time.Second}}
	r := &run{phases: phases, deadline: time.Second, hitsByPhase: []int64{100, 250, 100, 0}}
	n := 40
	r.hitsAt = make([]int64, n)
	r.connsAt = make([]int64, n)
	r.connsAt[3], r.connsAt[15], r.connsAt[25], r.connsAt[35] = 1, 2, 3, 4
	// 100 operations per phase, one every 10ms, 20ms each. Outage
	// operations fail in 1ms; recovery operations before 1.3s of the
	// phase fail too, as if the dependency took 300ms to come back.
	for p := range 3 {
		for i := range 100 {
			start := time.Duration(p)*time.Second + time.Duration(i)*10*time.Millisecond
			o := opResult{phase: p, start: start, latency: 20 * time.Millisecond, ok: true, status: 200}
			if p == 1 || (p == 2 && i < 30) {
				o.ok, o.status, o.latency = false, 503, time.Millisecond
			}
			r.ops = append(r.ops, o)
		}
	}
	st := r.phaseStats()
	want := []struct {
		ok, failed int
		goodput    float64
		hits       int64
		amp        float64
		conns      int64
	}{
		{100, 0, 100, 100, 1, 1},
		{0, 100, 0, 250, 2.5, 2},
		{70, 30, 70, 100, 1, 7},
	}
	for i, w := range want {
		s := st[i]
		if s.ops != 100 || s.ok != w.ok || s.failed != w.failed || s.goodput != w.goodput || s.hits != w.hits || s.amp != w.amp || s.conns != w.conns {
			t.Errorf("phase %d: ops %d ok %d failed %d goodput %v hits %d amp %v conns %d; want ops 100 ok %d failed %d goodput %v hits %d amp %v conns %d",
				i, s.ops, s.ok, s.failed, s.goodput, s.hits, s.amp, s.conns, w.ok, w.failed, w.goodput, w.hits, w.amp, w.conns)
		}
	}
	if st[1].failLat.max != time.Millisecond || st[0].lat.p50 != 20*time.Millisecond {
		t.Errorf("latencies: outage failed max %v, healthy p50 %v; want 1ms, 20ms", st[1].failLat.max, st[0].lat.p50)
	}
	// Successes per window after 2s: [2.0, 2.5) has 20 of 50 (40%), ...,
	// [2.3, 2.8) has 50 of 50 minus the one that ends after 2.8s.
	if got, ok := r.recovery(); !ok || got != 300*time.Millisecond {
		t.Errorf("recovery = %v, %v; want 300ms, true", got, ok)
	}
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	q := summarise(d)
	if q.n != 100 || q.p50 != 50*time.Millisecond || q.p99 != 99*time.Millisecond || q.max != 100*time.Millisecond {
		t.Errorf("summarise = %+v, want n 100, p50 50ms, p99 99ms, max 100ms", q)
	}
	if q := summarise(nil); q != (quantiles{}) {
		t.Errorf("summarise(nil) = %+v, want zero", q)
	}
}

func TestPaperAmp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ops, proc int
		want      float64
	}{
		// A bucket of 20 that gains 0.1 per operation admits 20 + floor(N/10) retries from full.
		{"one process", 1000, 1, 1 + (20+100)/1000.0},
		{"ten processes", 1000, 10, 1 + 10*(20+10)/1000.0},
		// 10 operations each: 20 retries allowed, 20 wanted.
		{"a hundred processes", 1000, 100, 3},
		{"budget beyond attempts", 1000, 1000, 3},
	}
	for _, tt := range tests {
		if got := paperAmp(tt.ops, tt.proc, 20, 0.1, 3); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: paperAmp = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMovingAverage(t *testing.T) {
	t.Parallel()
	got := movingAverage([]int64{0, 10, 20, 30, 40}, 3)
	want := []float64{5, 10, 20, 30, 35}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("movingAverage = %v, want %v", got, want)
			break
		}
	}
}
