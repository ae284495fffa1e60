package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// quotaLoopback is a loopback server (HTTP/1.1, or HTTP/2 over TLS) that
// admits perWindow requests in each 1-second window of the wall clock's
// whole seconds and answers the next with a 429 that carries only a
// Retry-After of 1 second. It counts the refusals per window.
type quotaLoopback struct {
	srv     *httptest.Server
	mu      sync.Mutex
	used    map[int64]int
	tooMany map[int64]int
}

func newQuotaLoopback(t *testing.T, h2 bool, perWindow int) *quotaLoopback {
	t.Helper()
	q := &quotaLoopback{used: map[int64]int{}, tooMany: map[int64]int{}}
	q.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		sec := now.Unix()
		q.mu.Lock()
		q.used[sec]++
		refused := q.used[sec] > perWindow
		if refused {
			q.tooMany[sec]++
		}
		q.mu.Unlock()
		if refused {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	q.srv.EnableHTTP2 = h2
	if h2 {
		q.srv.StartTLS()
	} else {
		q.srv.Start()
	}
	t.Cleanup(q.srv.Close)
	return q
}

// refusals returns the refusals per window.
func (q *quotaLoopback) refusals() map[int64]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := make(map[int64]int, len(q.tooMany))
	for k, v := range q.tooMany {
		m[k] = v
	}
	return m
}

// TestWaitQuotaHoldersSeeAtMostOneRefusalPerWindowOverLoopback: 20
// operations with WaitQuota share a Transport against a loopback server
// that admits 5 requests a second, over HTTP/1.1 and HTTP/2 (TLS), with
// a 429 and a whole-second Retry-After only. Once the first refusal
// paused the destination, the held operations are let go one at a time,
// each as the answer before arrives: every operation gets an answer, and
// the server sees at most one refusal per window, however slowly the
// machine runs (a refusal pauses the destination past its window's end).
// (With GitHub's X-RateLimit-* fields the client sends a renewed
// window's quota at once, and a request sent at the end of one window
// may reach the server in the next: the server's count by arrival then
// depends on the machine's speed, so no such case is held here.)
func TestWaitQuotaHoldersSeeAtMostOneRefusalPerWindowOverLoopback(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	for _, c := range []struct {
		name string
		h2   bool
	}{
		{"HTTP/1.1 Retry-After", false},
		{"HTTP/2 Retry-After", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const perWindow, ops = 5, 20
			q := newQuotaLoopback(t, c.h2, perWindow)
			tr := &Transport{Base: q.srv.Client().Transport, MaxAttempts: 1, MaxRetryAfter: time.Minute,
				Throttle: drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 })}
			client := &http.Client{Transport: tr}
			// Every request is bounded: a held operation never let go
			// fails the test under its name, not the package's timeout.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			get := func() int {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, q.srv.URL+"/", nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("held operation: %v; want an answer", err)
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			// Spend a window, up to its refusal: the pause. Bursts of
			// 10 at once, so that 6 land in one window however slowly
			// the machine runs; until a refusal there is no pause to
			// hold for.
			for burst := 0; !spend(get, 2*perWindow); burst++ {
				if burst == 20 || t.Failed() {
					t.Fatalf("no refusal after %d bursts of %d: no pause to hold operations for", burst+1, 2*perWindow)
				}
			}
			before := q.refusals()
			var wg sync.WaitGroup
			for range ops {
				wg.Go(func() { get() })
			}
			wg.Wait()
			for w, n := range q.refusals() {
				if n-before[w] > 1 {
					t.Errorf("window %d: %d refusals after the pause (before it: %d); want at most 1", w, n-before[w], before[w])
				}
			}
		})
	}
}

// spend sends n requests at once through get and reports whether one of
// them was refused with a 429.
func spend(get func() int, n int) bool {
	var refused atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if get() == http.StatusTooManyRequests {
				refused.Store(true)
			}
		})
	}
	wg.Wait()
	return refused.Load()
}
