package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/throttle"
)

// inflightCounter is a Base that sends through inner and keeps the most
// requests it had in flight at once.
type inflightCounter struct {
	inner        http.RoundTripper
	now, most, n atomic.Int64
}

func (c *inflightCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	now := c.now.Add(1)
	defer c.now.Add(-1)
	for m := c.most.Load(); now > m && !c.most.CompareAndSwap(m, now); m = c.most.Load() {
	}
	return c.inner.RoundTrip(r)
}

// TestWaitQuotaHoldersBehindNginxLimitReqAreReleasedOneAtATime: a real
// nginx with limit_req (6 a minute, no burst, limit_req_status 429) in
// front of a backend whose first answer is a 429 with Retry-After: 1.
// That 429 pauses the destination, and 20 operations with WaitQuota
// (3 attempts each) are held for it. When the pause ends they are let go
// one at a time, and nginx answers each with its own 429, which carries
// no Retry-After and no rate-limit fields: each such 429 passes the turn
// on. Every operation returns an answer, nginx never has two of the
// client's requests at once, and it sees every attempt (at most 3 per
// operation). No goroutine is left behind (the package's goleak check).
func TestWaitQuotaHoldersBehindNginxLimitReqAreReleasedOneAtATime(t *testing.T) {
	realTime(t)
	t.Parallel()
	base := &inflightCounter{inner: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer base.inner.(*http.Transport).CloseIdleConnections()
	ngx, th := pausedBehindNginx(t, base)
	tr := &Transport{Base: base, MaxAttempts: 3, MaxRetryAfter: time.Minute, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, Throttle: th}
	const holders = 20
	var wg sync.WaitGroup
	var answered atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range holders {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ngx.URL+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Errorf("held operation: %v; want an answer", err)
				return
			}
			resp.Body.Close()
			answered.Add(1)
		})
	}
	wg.Wait()
	if n := answered.Load(); n != holders {
		t.Errorf("%d of %d held operations answered", n, holders)
	}
	if most := base.most.Load(); most != 1 {
		t.Errorf("nginx had up to %d of the client's requests at once; want 1: the held operations go one at a time", most)
	}
	sent := base.n.Load()
	// nginx logs a request once it has answered it: the last line may
	// come a moment after the client read the answer.
	logged, err := ngx.Requests()
	for end := time.Now().Add(hangGuardBody); err == nil && int64(logged) < sent && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // a poll, not a timing assumption
		logged, err = ngx.Requests()
	}
	if err != nil {
		t.Fatal(err)
	}
	if int64(logged) != sent || sent > 1+3*holders || sent < 1+holders {
		t.Errorf("nginx logged %d requests, the client sent %d; want the same, from %d to %d", logged, sent, 1+holders, 1+3*holders)
	}
}

// pausedBehindNginx starts a backend behind a real nginx that limits
// requests to 6 a minute (its 429s carry no Retry-After and no rate-limit
// fields), and sends one request through base with a Throttle that waits
// for quotas: the backend answers it 429 with Retry-After: 1, which pauses
// the destination. It returns nginx and the Throttle, paused.
func pausedBehindNginx(t *testing.T, base http.RoundTripper) (*httptestutil.Nginx, *throttle.Throttle) {
	t.Helper()
	var backendCalls atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if backendCalls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(backend.Close)
	ngx := startNginx(t, httptestutil.NginxConfig{Upstream: strings.TrimPrefix(backend.URL, "http://"), LimitReq: "6r/m"})
	th := drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 })
	pauser := &Transport{Base: base, MaxAttempts: 1, Throttle: th}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, ngx.URL+"/", nil)
	resp, err := pauser.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("the backend's first answer through nginx: %v; want its 429 with Retry-After: 1", err)
	}
	resp.Body.Close()
	return ngx, th
}
