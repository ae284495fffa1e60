package httpretry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestAttack4QuotaHTTP2ConcurrentCallersAtMostOne429: a real loopback
// HTTP/2 server with a quota of 40 in a window of a minute (longer than
// the test), announced in RateLimit and RateLimit-Policy; it counts a
// request when its handler starts and answers after 0 to 3ms, as
// handlers do. 8 callers share one Transport, after one request made the
// quota known. README: "a process gets at most one 429 per quota
// window". Answers overtake each other on the connection; whenever the
// last one in flight to arrive was counted early, its larger remaining
// count replaces the smaller one the server already gave, and requests
// the server no longer has are sent. Any count of 429s above 1 is a
// break, however the goroutines are scheduled: a client that never
// raises its count above the least the server said in the window gets
// none.
func TestAttack4QuotaHTTP2ConcurrentCallersAtMostOne429(t *testing.T) {
	t.Parallel()
	const limit = 40
	var mu sync.Mutex
	used, tooMany := 0, 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		status := 200
		if used >= limit {
			status = 429
			tooMany++
		} else {
			used++
		}
		left := limit - used
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		w.Header().Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=60`, left))
		w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=60`, limit))
		w.WriteHeader(status)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 1, Throttle: &throttle.Throttle{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func() error {
		resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/", nil))
		if err != nil {
			return err
		}
		if resp.ProtoMajor != 2 {
			t.Errorf("protocol %s; want HTTP/2", resp.Proto)
		}
		resp.Body.Close()
		return nil
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				err := call()
				if errors.Is(err, throttle.ErrQuotaExhausted) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if tooMany > 1 {
		t.Errorf("HTTP/2, 8 callers, a quota of %d the client knew: %d 429s in one window; want at most 1 (README: a process gets at most one 429 per quota window)", limit, tooMany)
	}
}
