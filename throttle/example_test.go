package throttle_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/throttle"
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
