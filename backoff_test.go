package httpretry

import (
	"testing"
	"time"
)

func TestBackoffWindow(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	tests := []struct {
		name      string
		base, max time.Duration
		r         int
		want      time.Duration
	}{
		{"first retry", 100 * ms, 5 * time.Second, 0, 100 * ms},
		{"second retry doubles", 100 * ms, 5 * time.Second, 1, 200 * ms},
		{"sixth retry", 100 * ms, 5 * time.Second, 5, 3200 * ms},
		{"capped", 100 * ms, 5 * time.Second, 6, 5 * time.Second},
		{"exact cap", 100 * ms, 400 * ms, 2, 400 * ms},
		{"just under a cap that is not a multiple", time.Second, 4*time.Second + 1, 2, 4 * time.Second},
		{"base equal to cap", 5 * time.Second, 5 * time.Second, 0, 5 * time.Second},
		{"base equal to cap, later retry", 5 * time.Second, 5 * time.Second, 3, 5 * time.Second},
		{"base above cap", 10 * time.Second, 5 * time.Second, 0, 5 * time.Second},
		{"shift 62", 1, maxDuration, 62, 1 << 62},
		{"shift 63 does not overflow", 1, maxDuration, 63, maxDuration},
		{"huge r", 100 * ms, 5 * time.Second, 1 << 30, 5 * time.Second},
		{"huge base and max", maxDuration / 2, maxDuration, 3, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := backoffWindow(tt.base, tt.max, tt.r); got != tt.want {
				t.Errorf("backoffWindow(%v, %v, %d) = %v; want %v", tt.base, tt.max, tt.r, got, tt.want)
			}
		})
	}
}

func TestFullJitter(t *testing.T) {
	t.Parallel()
	for _, w := range []time.Duration{0, -time.Second} {
		if got := FullJitter(w); got != 0 {
			t.Errorf("FullJitter(%v) = %v; want 0", w, got)
		}
	}
	const window = 100 * time.Millisecond
	const n = 10000
	var sum time.Duration
	lowHalf := 0
	for range n {
		d := FullJitter(window)
		if d < 0 || d >= window {
			t.Fatalf("FullJitter(%v) = %v; want in [0, %v)", window, d, window)
		}
		if d < window/2 {
			lowHalf++
		}
		sum += d
	}
	// A uniform draw has mean window/2 and puts half its draws below it;
	// bounds of ±5% are over ten standard deviations wide at n = 10000.
	if mean := sum / n; mean < 45*time.Millisecond || mean > 55*time.Millisecond {
		t.Errorf("mean of %d draws = %v; want about %v", n, mean, window/2)
	}
	if lowHalf < 4500 || lowHalf > 5500 {
		t.Errorf("%d of %d draws below window/2; want about half", lowHalf, n)
	}
	if FullJitter(1) != 0 {
		t.Errorf("FullJitter(1ns) must be 0, the only value in [0, 1)")
	}
}

func TestTransportJitterClamped(t *testing.T) {
	t.Parallel()
	const window = time.Second
	tests := []struct {
		name   string
		jitter func(time.Duration) time.Duration
		want   time.Duration
	}{
		{"negative clamps to zero", func(time.Duration) time.Duration { return -time.Hour }, 0},
		{"oversized clamps to window", func(time.Duration) time.Duration { return time.Hour }, window},
		{"in range kept", func(time.Duration) time.Duration { return 300 * time.Millisecond }, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := &Transport{Jitter: tt.jitter}
			if got := tr.jitter(window); got != tt.want {
				t.Errorf("jitter(%v) = %v; want %v", window, got, tt.want)
			}
		})
	}
}
