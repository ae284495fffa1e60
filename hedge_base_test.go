package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeBaseThatRetriesMakesOneAttemptPerHedge: the Transport's Base
// is a plain *http.Transport and Hedging.Base a retrying Transport (a
// separate pool, as docs/hedging.md recommends, wrapped for its own
// hooks). The first attempt is slow and answers 200; the hedge meets a
// 503. Retries happen at one layer: the hedge's Transport sends the hedge
// once, so the server sees two requests for two attempts, not the hedge
// retried below.
func TestHedgeBaseThatRetriesMakesOneAttemptPerHedge(t *testing.T) {
	realTime(t)
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			time.Sleep(time.Second)
			w.Write([]byte("slow"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	plain := srv.Client().Transport.(*http.Transport)
	hedgePool := plain.Clone()
	defer hedgePool.CloseIdleConnections()
	inner := &Transport{Base: hedgePool, BaseDelay: time.Millisecond}
	tr := &Transport{Base: plain, MaxAttempts: 2, Hedging: &Hedging{Delay: 20 * time.Millisecond, Base: inner}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "slow" {
		t.Fatalf("body %q; want the first attempt's", got)
	}
	if n := hits.Load(); n != 2 || o.Attempts != 2 {
		t.Errorf("%d attempts, %d requests at the server; want 2 and 2: the hedge's Transport retried it", o.Attempts, n)
	}
}

// TestCloseIdleConnectionsReachesTheHedgePool: CloseIdleConnections
// closes the idle connections of Hedging.Base, the pool hedges use, as
// well as Base's.
func TestCloseIdleConnectionsReachesTheHedgePool(t *testing.T) {
	t.Parallel()
	base, hedges := &idleCloser{}, &idleCloser{}
	tr := &Transport{Base: base, Hedging: &Hedging{Base: hedges}}
	tr.CloseIdleConnections()
	if base.n.Load() != 1 || hedges.n.Load() != 1 {
		t.Errorf("CloseIdleConnections reached Base %d times, Hedging.Base %d times; want 1 and 1", base.n.Load(), hedges.n.Load())
	}
	same := &Transport{Base: base, Hedging: &Hedging{Base: base}}
	same.CloseIdleConnections()
	if base.n.Load() != 2 {
		t.Errorf("one pool as Base and Hedging.Base closed %d times; want once", base.n.Load()-1)
	}
}

// idleCloser is a RoundTripper that counts CloseIdleConnections calls.
type idleCloser struct{ n atomic.Int32 }

func (c *idleCloser) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, http.ErrNotSupported
}
func (c *idleCloser) CloseIdleConnections() { c.n.Add(1) }

// TestHedgeOwnCertificateErrorLeavesTheFirstAttemptRunning: a TLS server
// answers the first attempt 200, once the hedge has failed; the hedge
// goes through Hedging.Base, a pool that does not trust the server's
// certificate (a private CA it was not given). The hedge's certificate
// error is no answer of the server's: it is set aside, no further hedge
// is sent once it is known (TestHedgeStops holds that rule), and the
// first attempt's 200 is returned.
func TestHedgeOwnCertificateErrorLeavesTheFirstAttemptRunning(t *testing.T) {
	t.Parallel()
	hedgeFailed := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hedgeFailed:
		case <-time.After(10 * time.Second):
		}
		w.Write([]byte("first"))
	}))
	defer srv.Close()
	untrusting := &http.Transport{}
	defer untrusting.CloseIdleConnections()
	var once sync.Once
	hedgeBase := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := untrusting.RoundTrip(req)
		once.Do(func() { close(hedgeFailed) })
		return resp, err
	})
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 3, Hedging: &Hedging{Delay: 10 * time.Millisecond, Base: hedgeBase}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v; want the first attempt's 200 (outcome %+v)", err, o)
	}
	if got := readBody(t, resp); got != "first" || o.Winner != 1 || o.Hedges < 1 {
		t.Errorf("body %q, winner %d, %d hedges; want the first attempt's answer after a hedge", got, o.Winner, o.Hedges)
	}
}

// TestHedgeBaseThatRetriesMakesOneAttemptPerHedgeWithNoHookSet: as
// TestHedgeBaseThatRetriesMakesOneAttemptPerHedge, with no hook set and no
// Outcome asked for: the hedge, through a retrying Transport under
// Hedging.Base, is still sent once. (A Hedging.Base other than an
// *http.Transport keeps the first attempt from being sent directly: its
// attempts carry the ownership mark.) The first attempt, told from the
// hedge by a header the hedge's pool sets, not by which reaches the
// server first, answers only once the hedge's Transport returned.
func TestHedgeBaseThatRetriesMakesOneAttemptPerHedgeWithNoHookSet(t *testing.T) {
	t.Parallel()
	hedgeDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hedge") != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select {
		case <-hedgeDone:
			w.Write([]byte("slow"))
		case <-r.Context().Done():
		case <-time.After(hangGuardBody):
		}
	}))
	defer srv.Close()
	plain := srv.Client().Transport.(*http.Transport)
	hedgePool := plain.Clone()
	defer hedgePool.CloseIdleConnections()
	var sent atomic.Int32
	inner := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		r = r.Clone(r.Context())
		r.Header.Set("X-Hedge", "1")
		return hedgePool.RoundTrip(r)
	}), BaseDelay: time.Millisecond}
	var once sync.Once
	hedges := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		defer once.Do(func() { close(hedgeDone) })
		return inner.RoundTrip(r)
	})
	tr := &Transport{Base: plain, MaxAttempts: 2, Hedging: &Hedging{Delay: time.Millisecond, Base: hedges}}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuardBody)
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "slow" {
		t.Fatalf("body %q; want the first attempt's", got)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("the hedge's Transport sent %d requests for one hedge; want 1 (retries at one layer)", n)
	}
}
