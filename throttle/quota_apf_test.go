package throttle

import (
	"net/http"
	"testing"

	"github.com/jonboulle/clockwork"
)

// TestQuotaAPF429DoesNotPauseTheAPIServer: Kubernetes API Priority and
// Fairness answers a request of a saturated priority level with 429,
// Retry-After and the level's UID (every APF answer names its flow
// schema and priority level). That level alone is saturated: the API
// server is not paused, and an operation whose route no answer tied to
// the level (here one whose request is not known) is admitted. The 429
// still counts as an overload signal.
func TestQuotaAPF429DoesNotPauseTheAPIServer(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: func() float64 { return 1 }}
	d := th.dests.Get("k", 0, newDest)
	h := http.Header{
		"Retry-After":                       {"1"},
		"X-Kubernetes-Pf-Flowschema-Uid":    {"7f4c1b2a-3e5d-4c6b-9a8f-1d2e3f4a5b6c"},
		"X-Kubernetes-Pf-Prioritylevel-Uid": {"0d1c2b3a-4f5e-6d7c-8b9a-a1b2c3d4e5f6"},
		"Content-Type":                      {"application/json"},
	}
	th.record(d, &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}, nil, fc.Now(), fc)
	if _, err := th.admit(d, fc); err != nil {
		t.Errorf("after an APF 429 of one priority level: %v; want admitted", err)
	}
	if req, acc := th.counts("k"); req != 1 || acc != 0 {
		t.Errorf("counts %v requests, %v accepts; want the 429 as one request not accepted", req, acc)
	}
	// The same 429 without the level's UID pauses the destination.
	d2 := th.dests.Get("k2", 0, newDest)
	th.record(d2, &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}, nil, fc.Now(), fc)
	if _, err := th.admit(d2, fc); err == nil {
		t.Error("after a plain 429 with Retry-After: admitted; want the destination paused")
	}
}
