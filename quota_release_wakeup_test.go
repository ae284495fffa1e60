package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestWaitQuotaManyHoldersWakeForEveryTurn: a loopback server answers
// its first request with a 429 and Retry-After: 1, which pauses the
// destination, then 40 requests with bare 429s, then 200s. 32 operations
// with WaitQuota and 3 attempts each are held for the pause and let go
// one at a time, the retries of the bare 429s waiting for turns too; one
// in four has its context canceled once the server has answered 10
// requests, whether it is waiting for a turn or in flight then. Every
// operation returns (an answer, or its caller's cancel for those
// canceled), the client never has two requests in flight at once, and no
// turn is missed: were one, the holders waiting for it would wait until
// their deadline.
func TestWaitQuotaManyHoldersWakeForEveryTurn(t *testing.T) {
	realTime(t)
	t.Parallel()
	const holders = 32
	var served atomic.Int32
	cancelSome := make(chan struct{})
	var cancelOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		switch {
		case n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case n <= 41:
			w.WriteHeader(http.StatusTooManyRequests)
		}
		if n == 11 {
			cancelOnce.Do(func() { close(cancelSome) })
		}
	}))
	defer srv.Close()
	inner := &http.Transport{MaxIdleConnsPerHost: 64}
	defer inner.CloseIdleConnections()
	base := &inflightCounter{inner: inner}
	th := drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 })
	tr := &Transport{Base: base, MaxAttempts: 3, MaxRetryAfter: time.Minute, BaseDelay: time.Millisecond,
		MaxDelay: 5 * time.Millisecond, Throttle: th}
	if err := get(t, &Transport{Base: base, MaxAttempts: 1, Throttle: th}, srv.URL); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var answered, canceled atomic.Int32
	for i := range holders {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if i%4 == 0 {
				go func() {
					select {
					case <-cancelSome:
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL, nil))
			switch {
			case err == nil:
				resp.Body.Close()
				answered.Add(1)
			case i%4 == 0 && errors.Is(err, context.Canceled):
				canceled.Add(1)
			default:
				t.Errorf("holder %d: %v; want an answer", i, err)
			}
		})
	}
	wg.Wait()
	if n := answered.Load() + canceled.Load(); n != holders {
		t.Errorf("%d answered and %d canceled of %d holders", answered.Load(), canceled.Load(), holders)
	}
	if most := base.most.Load(); most != 1 {
		t.Errorf("up to %d requests in flight at once; want 1: the holders go one at a time", most)
	}
	if got, sent := served.Load(), int32(base.n.Load()); got > sent {
		t.Errorf("server answered %d requests, the client sent %d", got, sent)
	}
}
