package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestWaitQuotaHoldersAreReleasedOneAtATimeAfterAPause: a loopback
// server that admits 5 requests per 1-second window and answers the
// next with a 429 and a Retry-After (whole seconds to the window's end),
// no rate-limit fields. A 429 pauses the destination; 20 operations with
// WaitQuota are held for the pause. When it ends they are let go one at
// a time, each as the answer before arrives, and a 429 pauses the rest
// again: each window holds at most one 429, so 20 operations at 5 a
// window see at most 4 (at the pause's end all at once, 15 of 20 would
// get 429). However slowly the machine runs, a window holds a 429 only
// once it admitted 5, so the bound holds.
func TestWaitQuotaHoldersAreReleasedOneAtATimeAfterAPause(t *testing.T) {
	realTime(t)
	t.Parallel()
	const perWindow = 5
	zero := time.Now()
	var mu sync.Mutex
	used, tooMany := map[int64]int{}, map[int64]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		el := time.Since(zero)
		n := int64(el / time.Second)
		mu.Lock()
		used[n]++
		over := used[n] > perWindow
		if over {
			tooMany[n]++
		}
		mu.Unlock()
		if over {
			rest := time.Second - el%time.Second
			w.Header().Set("Retry-After", strconv.FormatInt(int64((rest+time.Second-1)/time.Second), 10))
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 1, MaxRetryAfter: time.Minute,
		Throttle: drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 })}
	client := &http.Client{Transport: tr}
	get := func() int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("held operation: %v; want an answer", err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for get() != http.StatusTooManyRequests { // spend a window, up to its 429: the pause
	}
	mu.Lock()
	before := 0
	for _, n := range tooMany {
		before += n
	}
	mu.Unlock()
	var wg sync.WaitGroup
	var ok sync.Map
	for i := range 20 {
		wg.Go(func() { ok.Store(i, get()) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	total := -before
	for w, n := range tooMany {
		if n > 1 {
			t.Errorf("window %d: %d 429s; want at most 1", w, n)
		}
		total += n
	}
	if total > 20/perWindow {
		t.Errorf("%d 429s for 20 operations held (per window: %v); want at most %d", total, tooMany, 20/perWindow)
	}
}
