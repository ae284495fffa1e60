package httpretry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// gatedQuota is a quotaServer whose requests are held at a gate until the
// test opens it, so that many are in flight at once.
type gatedQuota struct {
	srv     *quotaServer
	entered atomic.Int64
	gate    chan struct{}
}

func (g *gatedQuota) RoundTrip(req *http.Request) (*http.Response, error) {
	g.entered.Add(1)
	<-g.gate
	return g.srv.RoundTrip(req)
}

// quotaBurst spends a 10-a-second quota at the fake clock's zero, then
// runs n operations at once from the next window on (WaitQuota ones are
// started while the quota is spent and wake at its reset), each held at
// the server until all have either reached it or been refused. It
// returns the 429s per window.
func quotaBurst(t *testing.T, n int, wait bool) map[int64]int {
	t.Helper()
	fc := clockwork.NewFakeClock()
	srv := &quotaServer{fixedWindow: newFixedWindow(fc, 10, time.Second),
		hits: map[int64]int{}, tooMany: map[int64]int{}}
	g := &gatedQuota{srv: srv, gate: make(chan struct{})}
	tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{WaitQuota: wait}}
	open := make(chan struct{})
	close(open)
	g.gate = open
	for range 10 { // the whole quota of window 0, sequentially
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("spending window 0's quota: %v, %v; want 200", resp, err)
		}
		resp.Body.Close()
	}
	g.gate = make(chan struct{})
	entered0 := g.entered.Load()
	if !wait {
		fc.Advance(time.Second) // window 1: the quota is restored
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				refused.Add(1)
				return
			}
			resp.Body.Close()
		})
	}
	if wait {
		advance(t, fc, n, time.Second) // every operation waits for the reset
	}
	// Open the gate once every operation reached the server or was
	// refused (or, for a client that holds some, after 3s).
	deadline := time.Now().Add(3 * time.Second)
	for g.entered.Load()-entered0+refused.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(g.gate)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for end := time.Now().Add(30 * time.Second); ; {
		select {
		case <-finished:
			srv.mu.Lock()
			defer srv.mu.Unlock()
			return srv.tooMany
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(end) {
				t.Fatal("operations still running after 30s")
			}
			fc.Advance(100 * time.Millisecond) // for a client that holds operations for a later window
		}
	}
}

// TestQuotaAtMostOne429PerWindowForConcurrentCallers: 30 operations
// started at once just after a 10-a-second quota resets get at most one
// 429 in any window: the client does not let every caller through at the
// reset before any response said what the new window holds.
func TestQuotaAtMostOne429PerWindowForConcurrentCallers(t *testing.T) {
	t.Parallel()
	for w, n := range quotaBurst(t, 30, false) {
		if n > 1 {
			t.Errorf("window %d: %d 429s from 30 concurrent operations against a quota of 10; want at most 1", w, n)
		}
	}
}

// TestWaitQuotaHoldersDoNotBurstPastTheQuota: 30 operations held with
// WaitQuota until a 10-a-second quota resets do not all go at the reset:
// at most one 429 in any window.
func TestWaitQuotaHoldersDoNotBurstPastTheQuota(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	for w, n := range quotaBurst(t, 30, true) {
		if n > 1 {
			t.Errorf("window %d: %d 429s from 30 operations released by WaitQuota at the reset of a quota of 10; want at most 1", w, n)
		}
	}
}

// TestWaitQuotaEndsWhenRequestCancelCloses: an operation held by
// WaitQuota ends at once, with no attempt, when the request's
// (deprecated) Cancel channel closes, as every other wait of the
// Transport does.
func TestWaitQuotaEndsWhenRequestCancelCloses(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(*http.Request) int { return 429 }, header: http.Header{"Ratelimit": {`"default";r=0;t=30`}}}
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{WaitQuota: true}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel := make(chan struct{})
	req := newRequest(t, context.Background(), "GET", "http://api.test/", nil)
	req.Cancel = cancel //lint:ignore SA1019 the deprecated channel still ends an operation
	ch := start(tr, req)
	awaitWaiters(t, fc, 1)
	close(cancel)
	select {
	case r := <-ch:
		if r.err == nil {
			r.resp.Body.Close()
			t.Fatalf("got %d; want the operation ended by Cancel", r.resp.StatusCode)
		}
		if got := base.hits.Load(); got != 1 {
			t.Errorf("%d attempts reached the server; want only the first operation's", got)
		}
	case <-time.After(5 * time.Second):
		fc.Advance(30 * time.Second)
		r := <-ch
		t.Errorf("Cancel closed, still held 5s later (then: %v); want the operation ended at once", r.err)
		if r.resp != nil {
			r.resp.Body.Close()
		}
	}
}

// TestQuotaAtMostOne429PerWindowForConcurrentCallersOverLoopback: over a
// real socket, HTTP/1.1 and HTTP/2, a server with a quota of 10 per 3s
// window announced in RateLimit; the client spends window 0's quota,
// then, once the announced reset has passed, 30 callers start at once
// (held at the server until all of them reached it or were refused): at
// most one 429 in any window.
func TestQuotaAtMostOne429PerWindowForConcurrentCallersOverLoopback(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			t.Parallel()
			const window = 3 * time.Second
			var (
				mu      sync.Mutex
				zero    time.Time
				current int64
				used    int
				tooMany = map[int64]int{}
				gate    = make(chan struct{})
				arrived atomic.Int64
			)
			close(gate)
			gateNow := func() chan struct{} { mu.Lock(); defer mu.Unlock(); return gate }
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived.Add(1)
				<-gateNow()
				mu.Lock()
				defer mu.Unlock()
				elapsed := time.Since(zero)
				n := int64(elapsed / window)
				if n != current {
					current, used = n, 0
				}
				secs := int64((window*time.Duration(n+1) - elapsed + time.Second - 1) / time.Second)
				status := 200
				if used >= 10 {
					status = 429
					tooMany[n]++
				} else {
					used++
				}
				w.Header().Set("RateLimit", `"default";r=`+strconv.Itoa(10-used)+`;t=`+strconv.FormatInt(secs, 10))
				w.WriteHeader(status)
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1, Throttle: &throttle.Throttle{}}}
			get := func() error {
				resp, err := client.Get(srv.URL)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			mu.Lock()
			zero = time.Now()
			mu.Unlock()
			for i := range 10 {
				if err := get(); err != nil {
					t.Fatalf("request %d of window 0's quota: %v", i+1, err)
				}
			}
			if err := get(); !errors.Is(err, throttle.ErrQuotaExhausted) {
				t.Fatalf("an 11th request in window 0: %v; want refused locally (ErrQuotaExhausted)", err)
			}
			// The announced reset is rounded up to whole seconds: at most
			// a second past the window's end.
			time.Sleep(time.Until(zero.Add(window + 1100*time.Millisecond)))
			mu.Lock()
			gate = make(chan struct{})
			closing := gate
			mu.Unlock()
			before := arrived.Load()
			var refused atomic.Int64
			var wg sync.WaitGroup
			for range 30 {
				wg.Go(func() {
					if err := get(); err != nil {
						refused.Add(1)
					}
				})
			}
			for end := time.Now().Add(3 * time.Second); arrived.Load()-before+refused.Load() < 30 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			close(closing)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for w, n := range tooMany {
				if n > 1 {
					t.Errorf("window %d: %d 429s from 30 concurrent callers against a quota of 10; want at most 1", w, n)
				}
			}
		})
	}
}

// TestQuotaOfOneResourceDoesNotRefuseAnother: a host whose responses name
// separate quotas spends one without the other: after a search response
// says the search quota (30 a minute) is spent, a request under the core
// quota, which has 4999 left, is still sent. The quotas are named by
// X-RateLimit-Resource (as GitHub's API does) or by the RateLimit
// policy's name (draft-ietf-httpapi-ratelimit-headers).
func TestQuotaOfOneResourceDoesNotRefuseAnother(t *testing.T) {
	t.Parallel()
	for _, style := range []string{"x-ratelimit", "ratelimit"} {
		fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			search := r.URL.Path == "/search/code"
			var h http.Header
			switch {
			case style == "ratelimit" && search:
				h = http.Header{"Ratelimit": {`"search";r=0;t=60`}, "Ratelimit-Policy": {`"search";q=30;w=60`}}
			case style == "ratelimit":
				h = http.Header{"Ratelimit": {`"core";r=4999;t=3600`}, "Ratelimit-Policy": {`"core";q=5000;w=3600`}}
			case search:
				h = http.Header{"X-Ratelimit-Resource": {"search"}, "X-Ratelimit-Remaining": {"0"},
					"X-Ratelimit-Reset": {strconv.FormatInt(fc.Now().Add(time.Minute).Unix(), 10)}}
			default:
				h = http.Header{"X-Ratelimit-Resource": {"core"}, "X-Ratelimit-Remaining": {"4999"},
					"X-Ratelimit-Reset": {strconv.FormatInt(fc.Now().Add(time.Hour).Unix(), 10)}}
			}
			return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
		})
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{}}
		for _, path := range []string{"/repos/a/b", "/search/code", "/repos/a/b"} {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test"+path, nil))
			if err != nil {
				t.Errorf("%s: GET %s after the search quota was spent: %v; want it sent (its core quota has 4999 left)", style, path, err)
				break
			}
			resp.Body.Close()
		}
	}
}

// TestQuotaFollowsTheServersCountWhenNothingIsInFlight: operations made
// one after another, each answered "5 remaining" (a server that does not
// count some requests, as GitHub's API does not count a 304 to a
// conditional request): nothing is in flight when a response says 5
// remain, so every operation is sent, none refused locally.
func TestQuotaFollowsTheServersCountWhenNothingIsInFlight(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(*http.Request) int { return 304 }, header: http.Header{"Ratelimit": {`"default";r=5;t=60`}}}
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{}}
	for i := range 20 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err != nil {
			t.Fatalf("operation %d, the last response saying 5 remain and nothing in flight: %v; want it sent", i+1, err)
		}
		resp.Body.Close()
	}
}

// retryAfter429 answers 429 with h the first time, 200 after.
func retryAfter429(h http.Header) *countingBase {
	var n atomic.Int64
	b := &countingBase{status: func(*http.Request) int {
		if n.Add(1) == 1 {
			return 429
		}
		return 200
	}, header: h}
	return b
}

// TestQuota429WithRetryAfterEndsWithRetryAfter: a 429 with Retry-After 60
// whose X-RateLimit headers name a quota with plenty left and an hour to
// its reset (as GitHub's secondary rate limit answers) holds the
// destination's operations for the 60 seconds it asked, not the hour.
func TestQuota429WithRetryAfterEndsWithRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(now)
	base := retryAfter429(http.Header{"Retry-After": {"60"}, "X-Ratelimit-Remaining": {"4990"},
		"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first: %v, %v; want the 429", resp, err)
	}
	resp.Body.Close()
	fc.Advance(61 * time.Second)
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatalf("61s after a 429 with Retry-After 60 (4990 of the quota left): %v; want it sent", err)
	}
	resp.Body.Close()
}

// TestQuota429WithRetryAfterAndAnUnreadableResetIsPaced: a 429 with
// Retry-After 30 whose X-RateLimit-Reset cannot be read (a fraction, as
// some APIs send) holds the destination's operations for those 30
// seconds: the next one, 10s later, is refused locally, not sent for
// another 429.
func TestQuota429WithRetryAfterAndAnUnreadableResetIsPaced(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(now)
	base := retryAfter429(http.Header{"Retry-After": {"30"}, "X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(30*time.Second).Unix(), 10) + ".250"}})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first: %v, %v; want the 429", resp, err)
	}
	resp.Body.Close()
	fc.Advance(10 * time.Second)
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("10s after a 429 with Retry-After 30: sent (status %d); want refused locally (ErrQuotaExhausted)", resp.StatusCode)
	}
	if !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Errorf("err = %v; want ErrQuotaExhausted", err)
	}
}

// TestQuotaHTTP2ConcurrentCallersGetAtMostOne429: a real loopback HTTP/2
// server with a quota of 40 in a window of a minute (longer than the
// test), announced in RateLimit and RateLimit-Policy; it counts a request
// when its handler starts and answers after 0 to 3ms, as handlers do. 8
// callers share one Transport, after one request made the quota known.
// Answers overtake each other on the connection, and an answer with a
// larger count than one already read never raises the count: the callers
// get at most one 429 in the window, however the goroutines are scheduled.
func TestQuotaHTTP2ConcurrentCallersGetAtMostOne429(t *testing.T) {
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
