package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
)

// TestAdaptiveHedgeOfSlowRequestAfterLateBurst shows why the zero-config
// adaptive delay misses the independent-slowness target on a busy
// machine. Operations arrive every 5 ms: 200 answered in 5 ms (the delay
// learns its p98), then a burst of 40 answered in 300 ms, as a GC pause or
// a busy core makes them, with the 16th of them one whose first attempt
// takes a second and whose hedge would be answered in 5 ms, then fast
// ones again.
//
// Every late operation outlasts the delay and asks for a hedge. The
// extra-load cap (MaxExtraLoad 2%, a burst of 10) grants ten, and the
// operations since put back 0.02 of a token each: the slow operation is
// refused, and since a refused hedge ends hedging for its operation, it
// waits out its whole second though the cap has a token again within
// 250 ms. In the independent scenario the same happens
// whenever arrivals or the machine bunch late answers together: the p98
// delay asks for hedges at exactly the rate the cap grants, with nothing
// to spare, and each slow operation refused puts a second back into the
// p99.9.
//
// The cap now refills at twice the delay's share and a refused hedge is
// asked for again after the delay, so the slow operation is hedged once
// the fast operations after the burst have put a token back: well before
// its first attempt's second is up. (Before, it took the whole second.)
func TestAdaptiveHedgeOfSlowRequestAfterLateBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 3 s")
	}
	const (
		warm, late = 200, 40
		slowOp     = warm + 15 // within the burst
		ops        = warm + late + 200
	)
	var mu sync.Mutex
	seen := map[int]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, _ := strconv.Atoi(r.Header.Get(opHeader))
		mu.Lock()
		seen[op]++
		first := seen[op] == 1
		mu.Unlock()
		d := 5 * time.Millisecond
		switch {
		case op == slowOp && first:
			d = time.Second
		case op == slowOp:
		case op >= warm && op < warm+late:
			d = 300 * time.Millisecond
		}
		select {
		case <-time.After(d):
			io.WriteString(w, "ok")
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	base := cleanhttp.DefaultPooledTransport()
	defer base.CloseIdleConnections()
	var refused, sent [ops]int
	tr := &httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{},
		OnDone: func(req *http.Request, o httpretry.Outcome) {
			op, _ := strconv.Atoi(req.Header.Get(opHeader))
			mu.Lock()
			refused[op], sent[op] = o.HedgesRefused, o.Hedges
			mu.Unlock()
		}}
	client := &http.Client{Transport: tr}
	var lat [ops]time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for op := range ops {
		time.Sleep(time.Until(start.Add(time.Duration(op) * 5 * time.Millisecond)))
		wg.Go(func() {
			lat[op], _ = hedgedGet(context.Background(), client, srv.URL, op, 3*time.Second)
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	d, ok := tr.HedgeDelay(srv.Listener.Addr().String())
	t.Logf("delay now %v (%v); slow operation: %v, hedges refused %d", d, ok, lat[slowOp], refused[slowOp])
	// How soon the token comes back depends on the machine; that it comes
	// back while the first attempt still runs does not.
	if sent[slowOp] == 0 {
		t.Errorf("the operation whose first attempt takes 1s sent no hedge (%d refused; took %v)", refused[slowOp], lat[slowOp])
	}
}
