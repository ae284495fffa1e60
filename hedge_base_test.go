package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
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
