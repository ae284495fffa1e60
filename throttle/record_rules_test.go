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
