package httpretry

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestHedgeLoserReleasesItsQuotaCount: every attempt sent takes a request
// from the destination's quota and is counted in flight until its answer
// is read. A hedge that lost, canceled without an answer, must give its
// count back: a count left behind would stand for an answer still to
// come for the rest of the window.
func TestHedgeLoserReleasesItsQuotaCount(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 2 { // the hedged operation's first attempt hangs
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		resp := response(req, 200, "ok")
		resp.Header.Set("X-RateLimit-Remaining", "50")
		resp.Header.Set("X-RateLimit-Reset", "60")
		return resp, nil
	})
	th := &Throttle{}
	tr := &Transport{Base: base, Clock: fc, Throttle: th}
	// The first answer makes the quota known.
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := th.dests.Get("api.test", 0, nil)
	var slot *quotaSlot
	for i := range s.quota.slots {
		if s.quota.slots[i].until.Load() != 0 {
			slot = &s.quota.slots[i]
		}
	}
	if slot == nil {
		t.Fatal("the quota the first answer announced is not held")
	}
	hedged := &Transport{Base: base, Clock: fc, Throttle: th, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	var o Outcome
	ch := start(hedged, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advanceAt(t, fc, hitCount{&hits}, 2, 1, 10*time.Millisecond)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if o.Hedges != 1 || o.LosersCanceled != 1 {
		t.Fatalf("outcome %+v; want one hedge and one loser canceled", o)
	}
	if n := slot.inflight.Load(); n != 0 {
		t.Errorf("after a hedged operation ended, %d request(s) of the quota still counted in flight; want 0 (the loser's count given back)", n)
	}
}
