package httpretry

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestHedgeLoserCanceledWithoutAnAnswerIsNotCountedTwice: a hedged
// operation whose first attempt hangs and whose hedge answers, against a
// destination with a known quota, sends two attempts: each takes a
// request from the quota, the loser is canceled without an answer and the
// winner's answer is read. The Throttle counts both as requests, and
// the quota still admits the next operation. (That the canceled loser's
// count in flight ends is held by the throttle package's
// TestRecordCanceledEndsItsQuotaCountInFlight.)
func TestHedgeLoserCanceledWithoutAnAnswerIsNotCountedTwice(t *testing.T) {
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
	th := &throttle.Throttle{}
	tr := &Transport{Base: base, Clock: fc, Throttle: th}
	// The first answer makes the quota known.
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
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
	if err := get(t, tr, "http://api.test/"); err != nil {
		t.Errorf("the next operation, 47 of the quota's 50 left: %v; want it sent", err)
	}
}
