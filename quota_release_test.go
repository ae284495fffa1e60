package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
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
	secondsOfRealTime(t)
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
	// Every request is bounded: a held operation never let go fails the
	// test under its name, not the package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("held operation: %v; want an answer", err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := 0; get() != http.StatusTooManyRequests; i++ { // spend a window, up to its 429: the pause
		if t.Failed() || i == 10000 {
			t.Fatalf("no 429 in %d requests: no window admitted 5 and then refused one", i+1)
		}
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

// TestWaitQuotaReleasesTheNextHeldOperationOnlyOnAnAnswer: on a fake
// clock, a 429 with Retry-After: 1 and no rate-limit fields pauses the
// destination; two operations with WaitQuota are held for the pause.
// When it ends, one is sent; the other is held until that one's answer
// arrives, 300ms later, then sent: at the pause's end the server sees one
// request, not both, both are answered, and OnWait reports the wait of
// each (the pause; the pause and the answer).
func TestWaitQuotaReleasesTheNextHeldOperationOnlyOnAnAnswer(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var calls atomic.Int32
	answer := make(chan struct{})
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: r}, nil
		}
		<-answer
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var mu sync.Mutex
	var waited []time.Duration
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, MaxRetryAfter: time.Minute,
		Throttle: drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 }),
		OnWait: func(_ *http.Request, w Wait) {
			mu.Lock()
			defer mu.Unlock()
			waited = append(waited, w.Waited)
		}}
	r := <-start(tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	if r.err != nil || r.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first operation: %v; want its 429", r.err)
	}
	r.resp.Body.Close()
	held := []<-chan result{
		start(tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)),
		start(tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)),
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuardBody)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, 2); err != nil {
		t.Fatalf("the two operations are not held for the pause: %v", err)
	}
	fc.Advance(time.Second)
	waitFor := func(n int32) {
		t.Helper()
		for calls.Load() < n {
			if ctx.Err() != nil {
				t.Fatalf("Base called %d times; want %d", calls.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(2)
	// The second held operation waits for the first one's answer: it is
	// not sent meanwhile, however long that takes.
	time.Sleep(20 * time.Millisecond)
	if n := calls.Load(); n != 2 {
		t.Fatalf("Base called %d times before the released operation was answered; want 2", n)
	}
	fc.Advance(300 * time.Millisecond) // the answer takes 300ms: the held one waits for it
	answer <- struct{}{}
	waitFor(3)
	answer <- struct{}{}
	for _, ch := range held {
		if r := await(t, ch); r.err != nil || r.resp.StatusCode != http.StatusOK {
			t.Errorf("held operation: %v; want its 200", r.err)
		} else {
			r.resp.Body.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(waited)
	if want := []time.Duration{time.Second, 1300 * time.Millisecond}; !slices.Equal(waited, want) {
		t.Errorf("OnWait reported waits %v; want %v: the pause, and the pause and the answer", waited, want)
	}
}

// TestWaitQuotaHoldersAreNotLeftWaitingByABare429: on a fake clock, a
// 429 with Retry-After: 1 pauses the destination, and three operations
// with WaitQuota are held for it. When it ends, the one let go is
// answered 429 with no Retry-After and no rate-limit fields: that names
// no time to pause for, so the next held operation goes, then the last,
// one at a time. Every held operation returns (one 429, two 200s) and
// Base is called once per operation.
func TestWaitQuotaHoldersAreNotLeftWaitingByABare429(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		st := http.StatusOK
		switch calls.Add(1) {
		case 1:
			st, h = http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
		case 2:
			st = http.StatusTooManyRequests
		}
		return &http.Response{StatusCode: st, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, MaxRetryAfter: time.Minute,
		Throttle: drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 })}
	r := <-start(tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	if r.err != nil || r.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first operation: %v; want its 429", r.err)
	}
	r.resp.Body.Close()
	var held []<-chan result
	for range 3 {
		held = append(held, start(tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)))
	}
	advance(t, fc, 3, time.Second)
	statuses := map[int]int{}
	for _, ch := range held {
		r := await(t, ch)
		if r.err != nil {
			t.Errorf("held operation: %v; want an answer", r.err)
			continue
		}
		statuses[r.resp.StatusCode]++
		r.resp.Body.Close()
	}
	if statuses[http.StatusOK] != 2 || statuses[http.StatusTooManyRequests] != 1 {
		t.Errorf("held operations answered %v; want one 429 and two 200s", statuses)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("Base called %d times; want 4, once per operation", n)
	}
}
