package throttle

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestSharedFleetCountsAreReadFromTheNewestBucketBack: the fleet's counts
// are read by bucket age, the newest first, as a process's own: 20
// failures one bucket old fill the window and refuse at the cap (a draw
// of 0.5 < 0.9); the fleet's 2 accepts 21 buckets old, past the window,
// are not reached. Read from the oldest back, the accepts would come
// first and leave the failures after them out.
func TestSharedFleetCountsAreReadFromTheNewestBucketBack(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	fc := clockwork.NewFakeClock()
	f := &fleetCounts{hot: true, req: make([]float64, throttleRing), acc: make([]float64, throttleRing)}
	f.req[1] = 20
	f.req[21], f.acc[21] = 2, 2
	th := &Throttle{draws: func() float64 { return 0.5 }, Shared: f}
	d := th.Dest(req)
	if _, _, err := th.Admit(d, req, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("Admit = %v; want ErrThrottled: 20 failures in the window", err)
	}
	d.mu.Lock()
	reqs, accs, n := th.decisionCounts(d, fc.Now())
	d.mu.Unlock()
	if reqs != 21 || accs != 0 || n != throttleBuckets {
		t.Errorf("decision counts %v requests, %v accepts over %d buckets; want 21 (the failures and the refusal), 0, over the window", reqs, accs, n)
	}
}

// widthFleet is a fleet that remembers the bucket width it was asked
// for.
type widthFleet struct {
	fleetCounts
	width time.Duration
}

func (f *widthFleet) Counts(key string, now time.Time, width time.Duration, requests, accepts []float64) {
	f.width = width
	f.fleetCounts.Counts(key, now, width, requests, accepts)
}

// TestSharedFleetCountsAreAskedInBucketsOfATenthOfTheWindow: the fleet's
// counts are asked for in the buckets the throttle keeps: a tenth of its
// Window, 60ms by default and 100ms for a 1s Window.
func TestSharedFleetCountsAreAskedInBucketsOfATenthOfTheWindow(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	for _, tt := range []struct {
		window, want time.Duration
	}{{0, 60 * time.Millisecond}, {time.Second, 100 * time.Millisecond}} {
		f := &widthFleet{fleetCounts: fleetCounts{hot: true}}
		th := &Throttle{Window: tt.window, Shared: f, draws: func() float64 { return 0.5 }}
		th.Admit(th.Dest(req), req, clockwork.NewFakeClock())
		if f.width != tt.want {
			t.Errorf("Window %v: counts asked in buckets of %v; want %v", tt.window, f.width, tt.want)
		}
	}
}

// TestSharedProcessCountsAreReadFromTheNewestBucketBack: with a fleet
// that adds nothing, a decision reads the process's own counts as it
// would without one, the newest bucket first: 2 failures in the head
// bucket, 9 failures 20 buckets back, 5 accepts 35 back. The counts
// reach back to the failures (11 requests, over 21 buckets), never to
// the accepts.
func TestSharedProcessCountsAreReadFromTheNewestBucketBack(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	th := &Throttle{Shared: &fleetCounts{hot: true}}
	d := th.Dest(req)
	d.w.head = 7
	d.w.b[7] = bucket{2, 0}
	d.w.b[(7-20+throttleRing)%throttleRing] = bucket{9, 0}
	d.w.b[(7-35+throttleRing)%throttleRing] = bucket{5, 5}
	d.mu.Lock()
	reqs, accs, n := th.decisionCounts(d, time.Now())
	d.mu.Unlock()
	if reqs != 11 || accs != 0 || n != 21 {
		t.Errorf("decision counts %v requests, %v accepts over %d buckets; want 11, 0, over 21", reqs, accs, n)
	}
}
