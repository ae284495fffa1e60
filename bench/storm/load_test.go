package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestArrivalsArePoisson(t *testing.T) {
	t.Parallel()
	const rate = 200.0
	phases := []phase{{name: "a", dur: 40 * time.Second}, {name: "b", dur: 10 * time.Second}, {name: "c", dur: 50 * time.Second}}
	arr := arrivals(1, rate, phases)

	// 20,000 expected: one standard deviation of the count is 141 (0.7%).
	if got, want := float64(len(arr)), rate*100; math.Abs(got-want) > 0.02*want {
		t.Errorf("arrivals = %v, want %v ± 2%%", got, want)
	}
	var sum, sq float64
	prev := time.Duration(0)
	for i, a := range arr {
		if a.at < prev {
			t.Fatalf("arrival %d at %v, before the previous at %v", i, a.at, prev)
		}
		gap := (a.at - prev).Seconds()
		sum += gap
		sq += gap * gap
		prev = a.at
	}
	n := float64(len(arr))
	mean := sum / n
	if want := 1 / rate; math.Abs(mean-want) > 0.02*want {
		t.Errorf("mean gap = %v, want %v ± 2%%", mean, want)
	}
	// Exponential gaps: the standard deviation equals the mean.
	if sd := math.Sqrt(sq/n - mean*mean); math.Abs(sd-mean) > 0.05*mean {
		t.Errorf("gap standard deviation = %v, want the mean %v ± 5%%", sd, mean)
	}

	counts := make([]int, len(phases))
	for _, a := range arr {
		counts[a.phase]++
		start := time.Duration(0)
		for _, p := range phases[:a.phase] {
			start += p.dur
		}
		if a.at < start || a.at >= start+phases[a.phase].dur {
			t.Fatalf("arrival at %v tagged phase %d, which runs from %v for %v", a.at, a.phase, start, phases[a.phase].dur)
		}
	}
	for i, c := range counts {
		want := rate * phases[i].dur.Seconds()
		if math.Abs(float64(c)-want) > 4*math.Sqrt(want) {
			t.Errorf("phase %d: %d arrivals, want %v ± 4σ", i, c, want)
		}
	}
}

func TestArrivalsSameSeedSameSchedule(t *testing.T) {
	t.Parallel()
	phases := []phase{{name: "a", dur: time.Second}}
	a, b := arrivals(7, 100, phases), arrivals(7, 100, phases)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave different arrivals")
	}
	if c := arrivals(8, 100, phases); slices.Equal(a, c) {
		t.Error("different seeds gave the same arrivals")
	}
}
