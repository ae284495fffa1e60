package throttle_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// A server that answers 503 to everything: after a few attempts the
// Throttle refuses most operations at once, without sending them.
func ExampleThrottle() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &httpretry.Transport{
		MaxAttempts: 1,
		Throttle:    &throttle.Throttle{},
	}}
	for range 1000 {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
			continue
		}
		var herr *httpretry.Error
		if errors.Is(err, throttle.ErrThrottled) && errors.As(err, &herr) {
			fmt.Println(herr.Reason, herr.Attempts)
			return
		}
	}
	// Output: throttled 0
}

// A server that says its quota is spent: the next operation to it is
// refused locally until the quota resets.
func ExampleParseRateLimit() {
	h := http.Header{}
	h.Set("RateLimit", `"default";r=0;t=30`)
	h.Set("RateLimit-Policy", `"default";q=100;w=60`)
	rl, ok := throttle.ParseRateLimit(h, time.Now())
	fmt.Println(ok, rl.Remaining, rl.Reset)
	// Output: true 0 30s
}

// The Throttle without httpretry's Transport: a client asks it before
// each request to a server that answers 503 to everything, and tells it
// how each went. After three 503s in the window (the fewest it refuses on at
// MinRate's 1 a second, over the 3s a failing window reaches back),
// most later requests are refused locally (each with the probability
// of the counts, at most 90%), and the clock is a fake one that does not
// move.
func ExampleThrottle_withoutTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	th := &throttle.Throttle{}
	clock := clockwork.NewFakeClock() // nil would be the system clock
	sent, refused := 0, 0
	for range 100 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		d := th.Dest(req)
		if _, _, err := th.Admit(d, req, clock); errors.Is(err, throttle.ErrThrottled) {
			refused++
			continue
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			th.Record(d, &throttle.Result{Overload: true}, clock)
			continue
		}
		resp.Body.Close()
		sent++
		overloaded := resp.StatusCode == http.StatusServiceUnavailable
		th.Record(d, &throttle.Result{Status: resp.StatusCode, Header: resp.Header, Overload: overloaded}, clock)
	}
	fmt.Println("sent at least 3:", sent >= 3, "most refused:", refused > 50)
	// Output: sent at least 3: true most refused: true
}
