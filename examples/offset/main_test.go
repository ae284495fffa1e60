package main

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"
)

// TestRunPrintsEachPodsSlot: the command prints each pod's slot, the
// same on every run.
func TestRunPrintsEachPodsSlot(t *testing.T) {
	var buf bytes.Buffer
	run(&buf)
	want := "pod-1 runs at 53m36s past the hour\npod-2 runs at 53m51s past the hour\npod-3 runs at 36m11s past the hour\n"
	if buf.String() != want {
		t.Errorf("run printed\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestOffsetStable pins offset's values: they must never change between
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
			got := offset(c.identity, c.period)
			if got != c.want {
				t.Errorf("offset(%q, %v) = %d; want %d", c.identity, c.period, got, c.want)
			}
			if c.period > 0 && (got < 0 || got >= c.period) {
				t.Errorf("offset(%q, %v) = %v; outside [0, period)", c.identity, c.period, got)
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
		o := offset(fmt.Sprintf("pod-%d", i), period)
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

// TestOffsetEdges: offset is 0 for a period that is not positive, within [0, period) otherwise, and the same on every call.
func TestOffsetEdges(t *testing.T) {
	for _, p := range []time.Duration{0, -1, -time.Hour, time.Duration(math.MinInt64)} {
		if got := offset("pod-7", p); got != 0 {
			t.Errorf("offset(pod-7, %v) = %v; want 0", p, got)
		}
	}
	for _, p := range []time.Duration{1, 2, time.Second, time.Hour, 1<<63 - 1} {
		for _, id := range []string{"", "pod-1", "pod-2", "\x00\xff"} {
			got := offset(id, p)
			if got < 0 || got >= p || got != offset(id, p) {
				t.Errorf("offset(%q, %v) = %v; want a stable value in [0, period)", id, p, got)
			}
		}
	}
}
