package throttle

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestThrottleAnAttemptWithoutAnswerSignallingOverloadMakesAColdDestinationHot:
// a destination that answered 50 attempts with 200 and no rate-limit
// fields (its responses are no longer read for a quota), then an attempt
// that got no answer and signalled overload (a refused connection): the
// destination is hot from it on, and its counts hold it as a request
// the server did not accept, beside the 50 accepts.
func TestThrottleAnAttemptWithoutAnswerSignallingOverloadMakesAColdDestinationHot(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{}
	d := th.dests.Get("k", 0, newDest)
	for range 50 {
		th.Record(d, &Result{Status: http.StatusOK, Header: http.Header{}, Sent: fc.Now()}, fc)
		fc.Advance(10 * time.Millisecond)
	}
	if d.hot.Load() || d.quota.wants(http.StatusOK) {
		t.Fatalf("after 50 accepts without rate-limit fields: hot %v, responses read %v; want cold, not read", d.hot.Load(), d.quota.wants(http.StatusOK))
	}
	th.Record(d, &Result{Overload: true, Sent: fc.Now()}, fc)
	if !d.hot.Load() {
		t.Fatal("after an attempt without an answer that signalled overload: cold; want hot")
	}
	if req, acc := th.counts("k"); math.Abs(acc-50) > 1e-9 || math.Abs(req-51) > 1e-9 {
		t.Errorf("counts %v requests, %v accepts; want 51, 50", req, acc)
	}
}

// TestThrottleAnAnswerBelow429SignallingOverloadMakesAColdDestinationHot:
// a destination that answered 50 attempts with 200 and no rate-limit
// fields (its responses are no longer read for a quota), then a 404 its
// caller says signalled overload (a proxy's x-envoy-overloaded on it):
// whatever its status, an answer that signalled overload is a request
// the server did not accept, and makes the destination hot.
func TestThrottleAnAnswerBelow429SignallingOverloadMakesAColdDestinationHot(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{}
	d := th.dests.Get("k", 0, newDest)
	for range 50 {
		th.Record(d, &Result{Status: http.StatusOK, Header: http.Header{}, Sent: fc.Now()}, fc)
		fc.Advance(10 * time.Millisecond)
	}
	if d.hot.Load() || d.quota.wants(http.StatusNotFound) {
		t.Fatalf("after 50 accepts without rate-limit fields: hot %v, responses read %v; want cold, not read", d.hot.Load(), d.quota.wants(http.StatusNotFound))
	}
	th.Record(d, &Result{Status: http.StatusNotFound, Header: http.Header{"X-Envoy-Overloaded": {"true"}}, Overload: true, Sent: fc.Now()}, fc)
	if !d.hot.Load() {
		t.Fatal("after a 404 that signalled overload: cold; want hot")
	}
	if req, acc := th.counts("k"); math.Abs(acc-50) > 1e-9 || math.Abs(req-51) > 1e-9 {
		t.Errorf("counts %v requests, %v accepts; want 51, 50", req, acc)
	}
}

// TestQuotaKnownOnceAResponseAnnouncesOne: QuotaKnown, which tells a
// caller to read the clock when it sends an attempt, is false for a
// destination that announced nothing, and true once a response
// announced a quota.
func TestQuotaKnownOnceAResponseAnnouncesOne(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{}
	d := th.dests.Get("k", 0, newDest)
	if d.QuotaKnown() {
		t.Fatal("before any response: QuotaKnown; want not")
	}
	th.Record(d, &Result{Status: http.StatusOK, Sent: fc.Now(), Header: http.Header{"Ratelimit": {`"default";r=5;t=10`}}}, fc)
	if !d.QuotaKnown() {
		t.Fatal("after a response announcing 5 left for 10s: not QuotaKnown; want known")
	}
}

// TestQuotaColdDestinationIsSampledOnlyAtAFold: a destination that sent
// no rate-limit fields for 16 responses in a row is no longer read for a
// quota; while it is cold, its responses are only counted, and the
// response that folds the count into the window (every 64th) is sampled:
// one that starts carrying fields is read again from the next fold on,
// not at once.
func TestQuotaColdDestinationIsSampledOnlyAtAFold(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{}
	d := th.dests.Get("k", 0, newDest)
	plain := Result{Status: http.StatusOK, Header: http.Header{}}
	fields := Result{Status: http.StatusOK, Header: http.Header{"X-Ratelimit-Remaining": {"50"}}}
	for range pendingFold {
		th.Record(d, &plain, fc)
	}
	th.Record(d, &fields, fc)
	if d.quota.wants(http.StatusOK) {
		t.Fatal("a response with fields between folds: read again at once; want at the next fold")
	}
	for range pendingFold - 2 {
		th.Record(d, &plain, fc)
	}
	th.Record(d, &fields, fc)
	if !d.quota.wants(http.StatusOK) {
		t.Error("a response with fields at the fold: not read again; want read")
	}
}

// TestServedTakesOnlyTheAnswersRecordWouldOnlyCount: Served counts a
// served answer, as Record would, only on a cold destination that reads
// no more of its answers' headers (16 answers without rate-limit fields
// in a row); on a destination still read, on a hot one, and for a 429,
// it does nothing and refuses, and Record then takes the answer. Served
// and Record count a served answer alike.
func TestServedTakesOnlyTheAnswersRecordWouldOnlyCount(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	plain := http.Header{"Content-Type": {"application/json"}}
	tests := []struct {
		name    string
		prepare func(th *Throttle, d *Dest)
		status  int
		want    bool
	}{
		{"cold, read no more", func(*Throttle, *Dest) {}, 200, true},
		{"a redirect, cold, read no more", func(*Throttle, *Dest) {}, 302, true},
		{"still read: fewer than 16 answers without fields", func(_ *Throttle, d *Dest) { d.quota.misses.Store(quotaMisses - 1) }, 200, false},
		{"hot", func(_ *Throttle, d *Dest) { d.hot.Store(true) }, 200, false},
		{"a 429", func(*Throttle, *Dest) {}, 429, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := &Throttle{draws: func() float64 { return 1 }}
			d := th.Dest(ruleRequest("/"))
			d.quota.misses.Store(quotaMisses)
			tt.prepare(th, d)
			before := d.pending.Load()
			if got := th.Served(d, tt.status, plain, fc); got != tt.want {
				t.Fatalf("Served = %v; want %v", got, tt.want)
			}
			counted := d.pending.Load() - before
			if want := map[bool]int64{true: 1}[tt.want]; counted != want {
				t.Errorf("Served counted %d accepts pending; want %d", counted, want)
			}
			if !tt.want {
				return
			}
			th.Record(d, &Result{Status: tt.status, Header: plain}, fc)
			if n := d.pending.Load() - before; n != 2 {
				t.Errorf("Served then Record of the same answer: %d pending; want 2", n)
			}
		})
	}
}
