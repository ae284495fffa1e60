package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestWindowSpreadsOverTheBucketsItsTimeCovers: accepts counted over a
// time are spread evenly over the buckets that time covers, a bucket
// begun counting whole, up to the window: over exactly two buckets'
// width, two buckets; over a nanosecond more, three; over twice the
// window, the window's ten, with half the accepts (the other half fell
// before it).
func TestWindowSpreadsOverTheBucketsItsTimeCovers(t *testing.T) {
	t.Parallel()
	const width = 60 * time.Millisecond
	tests := []struct {
		name    string
		elapsed time.Duration
		n       float64
		buckets int
		each    float64
	}{
		{"two buckets' width", 2 * width, 10, 2, 5},
		{"a nanosecond more", 2*width + 1, 12, 3, 4},
		{"twice the window", 2 * throttleBuckets * width, 40, throttleBuckets, 2},
	}
	for _, tt := range tests {
		var w window
		w.head = 7
		head := w.spread(tt.n, tt.elapsed, width)
		req, acc, _ := w.counts()
		filled := 0
		for _, b := range w.b {
			if b.acc > 0 {
				filled++
			}
		}
		if head != tt.each || filled != tt.buckets || req != float64(tt.buckets)*tt.each || acc != req {
			t.Errorf("%s: head %v, %d buckets filled, %v requests, %v accepts; want %v in each of %d", tt.name, head, filled, req, acc, tt.each, tt.buckets)
		}
	}
}

// TestWindowAdvanceClearsThePassedBuckets: advancing the window by three
// buckets' width clears the three buckets it passes and keeps the
// others; advancing by the whole ring or more clears every bucket; a
// time before the head bucket began clears nothing.
func TestWindowAdvanceClearsThePassedBuckets(t *testing.T) {
	t.Parallel()
	const width = time.Second
	start := time.Unix(1000, 0)
	full := func() *window {
		w := &window{start: start}
		for i := range w.b {
			w.b[i] = bucket{1, 1}
		}
		return w
	}
	tests := []struct {
		name string
		now  time.Time
		kept float64
	}{
		{"before the head bucket began", start.Add(-time.Second), throttleRing},
		{"within the head bucket", start.Add(width - 1), throttleRing},
		{"three buckets on", start.Add(3 * width), throttleRing - 3},
		{"the whole ring on", start.Add(throttleRing * width), 0},
		{"an hour on", start.Add(time.Hour), 0},
	}
	for _, tt := range tests {
		w := full()
		w.advance(tt.now, width)
		kept := 0.0
		for _, b := range w.b {
			kept += b.req
		}
		if kept != tt.kept || w.start.After(tt.now.Add(width)) {
			t.Errorf("%s: %v buckets kept, head bucket from %v; want %v kept, the head bucket holding %v", tt.name, kept, w.start, tt.kept, tt.now)
		}
	}
}

// TestThrottleColdAcceptsAreFoldedAtThe64th: a cold destination counts
// its accepts apart, without the clock, and folds them into its window
// at every 64th: after 63 the window holds none, after the 64th all 64.
func TestThrottleColdAcceptsAreFoldedAtThe64th(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{}
	d := th.dests.Get("k", 0, newDest)
	for range pendingFold - 1 {
		th.Record(d, &Result{Status: http.StatusOK, Header: http.Header{}}, fc)
	}
	if req, _ := th.counts("k"); req != 0 {
		t.Fatalf("after %d accepts: the window holds %v requests; want 0, not folded yet", pendingFold-1, req)
	}
	th.Record(d, &Result{Status: http.StatusOK, Header: http.Header{}}, fc)
	if req, acc := th.counts("k"); req != pendingFold || acc != pendingFold {
		t.Errorf("after %d accepts: the window holds %v requests, %v accepts; want %d of each", pendingFold, req, acc, pendingFold)
	}
}

// TestThrottleMinRateCountsOverTheWindow: MinRate 100 a second over a
// window of 600ms asks for 60 requests before any refusal: 59 failures
// refuse nothing, the 60th makes the next attempt refused.
func TestThrottleMinRateCountsOverTheWindow(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{MinRate: 100, draws: func() float64 { return 0 }}
	d := th.dests.Get("k", 0, newDest)
	for range 59 {
		th.Record(d, &Result{Status: http.StatusServiceUnavailable, Header: http.Header{}, Overload: true}, fc)
	}
	if err := th.AdmitRetry(d, fc); err != nil {
		t.Fatalf("after 59 failures: %v; want admitted, fewer than 60 requests", err)
	}
	th.Record(d, &Result{Status: http.StatusServiceUnavailable, Header: http.Header{}, Overload: true}, fc)
	if err := th.AdmitRetry(d, fc); err == nil {
		t.Error("after 60 failures: admitted; want refused")
	}
}
