package throttle

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// fleetCounts is a Shared in memory: the other processes' counts are
// what a test sets, bucket by bucket; what the throttle adds is recorded.
type fleetCounts struct {
	mu       sync.Mutex
	hot      bool
	req, acc []float64 // by bucket age
	added    map[string][2]float64
	hotCalls int
}

func (f *fleetCounts) Add(key string, _ time.Time, requests, accepts float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.added == nil {
		f.added = map[string][2]float64{}
	}
	a := f.added[key]
	f.added[key] = [2]float64{a[0] + requests, a[1] + accepts}
}

func (f *fleetCounts) Hot(string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hotCalls++
	return f.hot
}

func (f *fleetCounts) Counts(_ string, _ time.Time, _ time.Duration, requests, accepts []float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range min(len(f.req), len(requests)) {
		requests[i] += f.req[i]
		accepts[i] += f.acc[i]
	}
}

// failingFleet is a fleet whose other processes counted n requests and
// no accept in each of the newest ten buckets.
func failingFleet(n float64) *fleetCounts {
	f := &fleetCounts{hot: true, req: make([]float64, throttleBuckets), acc: make([]float64, throttleBuckets)}
	for i := range f.req {
		f.req[i] = n
	}
	return f
}

// TestSharedFleetOverloadRefusesAProcessThatSawNone: a process that has
// sent nothing to a destination decides on the fleet's counts: with the
// fleet's 1,000 requests and no accept in the window, the draw refuses
// at the cap (a draw of 0.5 < 0.9), where the same process alone admits.
func TestSharedFleetOverloadRefusesAProcessThatSawNone(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	fc := clockwork.NewFakeClock()
	draw := func() float64 { return 0.5 }

	alone := &Throttle{draws: draw}
	if _, _, err := alone.Admit(alone.Dest(req), req, fc); err != nil {
		t.Fatalf("alone: Admit = %v; want nil (nothing counted)", err)
	}

	f := failingFleet(100)
	th := &Throttle{draws: draw, Shared: f}
	d := th.Dest(req)
	if d.Idle() {
		t.Fatal("Idle = true for a destination the fleet holds hot")
	}
	if _, _, err := th.Admit(d, req, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("shared: Admit = %v; want ErrThrottled", err)
	}
	if err := th.AdmitRetry(d, fc); !errors.Is(err, ErrThrottled) {
		t.Fatalf("shared: AdmitRetry = %v; want ErrThrottled", err)
	}
	// Each refusal is a request of this process, handed to the fleet.
	if got := f.added["api.example"]; got != [2]float64{2, 0} {
		t.Errorf("added to the fleet %v; want [2 0] (two refusals)", got)
	}
}

// TestSharedFleetAcceptsLetAProcessAdmitAgain: the fleet's accepts
// count as the process's own: with the fleet's window holding as many
// accepts as requests, nothing is refused, even by a process whose own
// last attempts all failed.
func TestSharedFleetAcceptsLetAProcessAdmitAgain(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	fc := clockwork.NewFakeClock()
	f := failingFleet(100)
	copy(f.acc, f.req)
	th := &Throttle{draws: func() float64 { return 0 }, Shared: f}
	d := th.Dest(req)
	for range 5 {
		th.Record(d, &Result{Status: http.StatusServiceUnavailable, Overload: true}, fc)
	}
	for i := range 20 {
		if _, _, err := th.Admit(d, req, fc); err != nil {
			t.Fatalf("Admit %d = %v; want nil: the fleet accepts what it is sent", i, err)
		}
		th.Record(d, &Result{Status: http.StatusOK}, fc)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// 5 overload signals and 20 accepts, all counted while hot.
	if got := f.added["api.example"]; got != [2]float64{25, 20} {
		t.Errorf("added to the fleet %v; want [25 20]", got)
	}
}

// TestSharedColdFleetCostsNoCountsAndNoClock: while neither the process
// nor the fleet saw overload, accepts are handed to nobody and Admit
// stays on its fast path (no clock reading: a nil-returning clock would
// panic there).
func TestSharedColdFleetCostsNoCountsAndNoClock(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	f := &fleetCounts{}
	th := &Throttle{Shared: f}
	d := th.Dest(req)
	for i := range pendingFold - 1 {
		if _, _, err := th.Admit(d, req, panicClock{}); err != nil {
			t.Fatalf("Admit %d = %v; want nil", i, err)
		}
		th.Record(d, &Result{Status: http.StatusOK}, firstReadOnly())
	}
	if len(f.added) != 0 {
		t.Errorf("added to the fleet %v while cold everywhere; want nothing", f.added)
	}
}

// TestSharedKeysAreCanonicalHosts: the fleet's counts are per key, the
// host in its one spelling or the Key function's name.
func TestSharedKeysAreCanonicalHosts(t *testing.T) {
	t.Parallel()
	f := &fleetCounts{}
	th := &Throttle{Shared: f}
	for _, u := range []string{"http://API.example:80/a", "http://api.example./b"} {
		d := th.Dest(httptest.NewRequest(http.MethodGet, u, nil))
		if got := th.shareKey(d); got != "api.example" {
			t.Errorf("%s shared under %q; want %q", u, got, "api.example")
		}
	}
	keyed := &Throttle{Shared: f, Key: func(*http.Request) string { return "tenant-a" }}
	if got := keyed.shareKey(keyed.Dest(httptest.NewRequest(http.MethodGet, "http://x/", nil))); got != "tenant-a" {
		t.Errorf("with Key: shared under %q; want tenant-a", got)
	}
}

// panicClock fails a test that reads it.
type panicClock struct{}

func (panicClock) Now() time.Time { panic("clock read on the fast path") }

// firstReadOnly is a clock that may be read (a cold destination reads
// it for its first accept).
func firstReadOnly() Clock { return clockwork.NewFakeClock() }

// TestSharedOutageStartHandsTheFleetOnlyTheNewestAccepts: the accepts a
// destination counted while cold are folded into its window at the first
// overload signal, spread over the time they were made; the fleet is
// handed only the part that falls in the newest bucket. Handed all at
// once, a healthy spell's accepts landed in the fleet's newest bucket
// at every process's first signal and kept a thousand processes
// admitting through an outage's start.
func TestSharedOutageStartHandsTheFleetOnlyTheNewestAccepts(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "http://api.example/x", nil)
	fc := clockwork.NewFakeClock()
	f := &fleetCounts{}
	th := &Throttle{Shared: f}
	d := th.Dest(req)
	for range 40 {
		th.Record(d, &Result{Status: http.StatusOK}, fc)
	}
	fc.Advance(2 * time.Second)
	th.Record(d, &Result{Status: http.StatusServiceUnavailable, Overload: true}, fc)
	// 40 accepts over 2s: 12 fall in the 600ms window, 1.2 a bucket.
	got := f.added["api.example"]
	if math.Abs(got[0]-2.2) > 1e-9 || math.Abs(got[1]-1.2) > 1e-9 {
		t.Errorf("handed to the fleet %v; want [2.2 1.2]: the newest bucket's 1.2 accepts and the overload answer", got)
	}
	if req, acc := th.counts("api.example"); math.Abs(acc-12) > 1e-9 || math.Abs(req-13) > 1e-9 {
		t.Errorf("own window %v requests, %v accepts; want 13 and 12", req, acc)
	}
}
