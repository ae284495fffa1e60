package httpretry

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/internal/latency"
	"github.com/jonboulle/clockwork"
)

// Over a real loopback server, HTTP/1.1 and HTTP/2, on a fake clock that
// never advances: however fast attempts end, no stride is set (no time
// passes between computations), every answered attempt's latency is
// recorded, and a final failure ("X-Should-Retry: false" 503) is none,
// on the direct path and the loop's alike.
func TestStillClockTimesEveryAnswerAndNoFinalFailureOverLoopback(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%5 == 0 {
			w.Header().Set("X-Should-Retry", "false")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	})
	h1 := newLoopbackServer(t, false, h)
	h2 := newLoopbackServer(t, true, h)
	for _, srv := range []*httptest.Server{h1, h2} {
		for _, loop := range []bool{false, true} {
			n.Store(0)
			fc := clockwork.NewFakeClock()
			tr := &Transport{Base: srv.Client().Transport, Clock: fc, Hedging: &Hedging{}}
			if loop {
				tr.OnAttempt = func(*http.Request, Attempt) {}
			}
			client := &http.Client{Transport: tr}
			const requests = 3000 // the window fills: 2,400 answers
			answered := 0
			u, _ := url.Parse(srv.URL)
			proto := "HTTP/1.1"
			if srv.EnableHTTP2 {
				proto = "HTTP/2"
			}
			for i := range requests {
				resp, err := client.Get(srv.URL + "/x")
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode == http.StatusOK {
					answered++
				}
				resp.Body.Close()
				if i == requests/2-1 {
					// Before the window fills: one latency per answer, none
					// for a final failure.
					if held := tr.latencies().Find(u.Host).Held(); held != int64(answered) {
						t.Errorf("%s, loop path %v: %d latencies held after %d answers", proto, loop, held, answered)
					}
				}
			}
			d := tr.latencies().Find(u.Host)
			if d == nil {
				t.Fatalf("no latencies for %s", u.Host)
			}
			if answered != requests*4/5 || d.Held() != latency.Window {
				t.Errorf("%s, loop path %v: %d answered of %d, %d latencies held; want %d answered, a full window", proto, loop, answered, requests, d.Held(), requests*4/5)
			}
			for i := range 64 {
				if !d.Times() {
					t.Errorf("%s, loop path %v: attempt %d after the run not timed; want every one, no time having passed", proto, loop, i)
					break
				}
			}
			if hd, ok := tr.HedgeDelay(u.Host); !ok || hd != DefaultMinHedgeDelay {
				t.Errorf("%s, loop path %v: hedge delay %v (%v); want the floor, no time having passed", proto, loop, hd, ok)
			}
		}
	}
}
