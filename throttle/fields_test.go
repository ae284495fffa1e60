package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestThrottleFieldDefaults: what each field's value means once resolved:
// non-finite and non-positive values take the default, K and Window are
// held at their minimums.
func TestThrottleFieldDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		th         *Throttle
		k, reject  float64
		window     time.Duration
		minPerSecs float64
	}{
		{"zero", &Throttle{}, 2, 0.9, 600 * time.Millisecond, DefaultMinRate},
		{"NaN", &Throttle{K: math.NaN(), MaxReject: math.NaN(), MinRate: math.NaN()}, 2, 0.9, 600 * time.Millisecond, DefaultMinRate},
		{"+Inf", &Throttle{K: math.Inf(1), MaxReject: math.Inf(1)}, 2, 0.9, 600 * time.Millisecond, DefaultMinRate},
		{"-Inf", &Throttle{K: math.Inf(-1), MaxReject: math.Inf(-1), MinRate: math.Inf(-1)}, 2, 0.9, 600 * time.Millisecond, 0},
		{"small K, tiny window", &Throttle{K: 0.5, Window: 5}, minK, 0.9, minWindow, DefaultMinRate},
		{"K at the minimum", &Throttle{K: 1.5, MaxReject: 3, Window: time.Second}, 1.5, 1, time.Second, DefaultMinRate},
		{"large K", &Throttle{K: 1e300, MaxReject: 0.5}, 1e300, 0.5, 600 * time.Millisecond, DefaultMinRate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.th.k(); got != tt.k {
				t.Errorf("k() = %v; want %v", got, tt.k)
			}
			if got := tt.th.maxReject(); got != tt.reject {
				t.Errorf("maxReject() = %v; want %v", got, tt.reject)
			}
			if got := tt.th.window(); got != tt.window {
				t.Errorf("window() = %v; want %v", got, tt.window)
			}
			want := 0.0
			if tt.minPerSecs > 0 {
				want = max(tt.minPerSecs*tt.window.Seconds(), throttleSamples)
			}
			if got := tt.th.minRequests(tt.window); got != want {
				t.Errorf("minRequests() = %v; want %v", got, want)
			}
		})
	}
}

// TestThrottleNaNDrawAdmits: a draw that returns NaN never refuses.
func TestThrottleNaNDrawAdmits(t *testing.T) {
	t.Parallel()
	th := &Throttle{MinRate: -1, draws: math.NaN}
	s := th.dests.Get("k", 0, newDest)
	fc := clockwork.NewFakeClock()
	throttleAt(th, s, fc, 50, false)
	for i := range 20 {
		if _, err := th.admit(s, fc); err != nil {
			t.Fatalf("decision %d with a NaN draw after 50 overload signals: %v; want admitted", i+1, err)
		}
	}
}
