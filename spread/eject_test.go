package spread

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestEjectionAfterAFailureRunGrowsWhileItKeepsFailing: the failure that
// completes a run of three ejects for 30 s; the next run, without a
// success, for 60 s, then 90 s, capped at 100 s; a success restores.
func TestEjectionAfterAFailureRunGrowsWhileItKeepsFailing(t *testing.T) {
	r := ejectRule{after: 3, base: 30 * time.Second, max: 100 * time.Second, share: 0.5}
	var h health
	now := t0
	for i, want := range []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second, 100 * time.Second, 100 * time.Second} {
		for j := range 3 {
			if h.ejected(now) {
				t.Fatalf("run %d: ejected after %d failures, want 3", i, j)
			}
			h = r.failed(h, now, 0, 4)
		}
		if !h.ejected(now) || h.until.Sub(now) != want {
			t.Fatalf("run %d: ejected until +%v, want +%v", i, h.until.Sub(now), want)
		}
		// A failure while ejected (a last-resort attempt) changes nothing.
		if h2 := r.failed(h, now, 0, 4); h2.until != h.until || h2.ejections != h.ejections {
			t.Fatalf("run %d: a failure while ejected moved the ejection", i)
		}
		now = h.until
	}
	if h = r.succeeded(h); h != (health{}) {
		t.Fatalf("after a success: %+v, want restored", h)
	}
}

// TestEjectionCappedToAShareAndNeverAll holds maxEjected and the cap in
// failed: a run that would eject past the cap leaves the address in, its
// failures counting on.
func TestEjectionCappedToAShareAndNeverAll(t *testing.T) {
	tests := []struct {
		n     int
		share float64
		want  int
	}{
		{1, 0.5, 0}, {2, 0.5, 1}, {2, 1, 1}, {3, 0.5, 1}, {4, 0.5, 2}, {4, 0.1, 1}, {10, 0.1, 1}, {10, 0.35, 3}, {4, 1, 3},
	}
	for _, tt := range tests {
		r := ejectRule{after: 1, base: time.Second, max: time.Second, share: tt.share}
		if got := r.maxEjected(tt.n); got != tt.want {
			t.Errorf("maxEjected(%d) at %v = %d, want %d", tt.n, tt.share, got, tt.want)
		}
	}
	r := ejectRule{after: 2, base: time.Second, max: time.Second, share: 0.5}
	var h health
	h = r.failed(r.failed(h, t0, 2, 4), t0, 2, 4)
	if h.ejected(t0) || h.fails != 2 {
		t.Fatalf("at the cap: %+v, want not ejected, 2 failures", h)
	}
	if h = r.failed(h, t0, 1, 4); !h.ejected(t0) {
		t.Fatalf("below the cap again: %+v, want ejected", h)
	}
	if h := (ejectRule{after: 0}).failed(health{fails: 100}, t0, 0, 4); h.ejected(t0) {
		t.Fatal("after 0 ejected an address")
	}
}
