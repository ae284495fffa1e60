package httpretry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/throttle"
)

// deadAddr returns a loopback address nothing listens on: connecting to
// it is refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startNginx starts a real nginx in front of upstream, or fails the test
// in CI (CI=true) when nginx is not installed; elsewhere it skips.
func startNginx(t *testing.T, c httptestutil.NginxConfig) *httptestutil.Nginx {
	t.Helper()
	n, err := httptestutil.StartNginx(c)
	if errors.Is(err, httptestutil.ErrNoNginx) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// throttledLoad sends ops operations, workers at a time, with a default
// Throttle, to url, and returns how many the Throttle refused locally.
func throttledLoad(t *testing.T, client *http.Client, url string, ops, workers int) (refused int) {
	t.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range workers {
		wg.Go(func() {
			for range next {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				if errors.Is(err, throttle.ErrThrottled) {
					n.Add(1)
				}
			}
		})
	}
	for range ops {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return int(n.Load())
}

// TestThrottleRefusesAnOutageBehindAReverseProxy: a backend that refuses
// connections, behind httputil.ReverseProxy, which answers each request
// with 502. The proxy's 502 is the overload signal of the backend behind
// it: of 400 operations (up to 3 attempts each), the proxy sees at most
// a quarter of the operations offered, as a dead backend called directly
// would.
func TestThrottleRefusesAnOutageBehindAReverseProxy(t *testing.T) {
	realTime(t)
	t.Parallel()
	var seen atomic.Int64
	backend := &url.URL{Scheme: "http", Host: deadAddr(t)}
	rp := httputil.NewSingleHostReverseProxy(backend)
	rp.ErrorLog = nil
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	client := &http.Client{Transport: &Transport{Base: proxy.Client().Transport, Throttle: &throttle.Throttle{}}}
	const ops = 400
	refused := throttledLoad(t, client, proxy.URL, ops, 4)
	if load := float64(seen.Load()) / ops; load > 0.25 {
		t.Errorf("the proxy saw %d requests for %d operations (%.2fx), %d refused locally; want at most 0.25x", seen.Load(), ops, load, refused)
	}
}

// TestThrottleRefusesAnOutageBehindNginx: the same over a real nginx,
// with a backend that refuses connections (nginx answers 502) and one
// that accepts them and never answers (504 after proxy_read_timeout,
// 50ms): the proxy's log holds at most a quarter of the operations
// offered.
func TestThrottleRefusesAnOutageBehindNginx(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("-short: waits seconds for a stuck backend")
	}
	t.Parallel()
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer stuck.Close()
	for _, tt := range []struct {
		name, upstream string
		status         int
	}{
		{"dead backend, 502", deadAddr(t), http.StatusBadGateway},
		{"stuck backend, 504", stuck.Listener.Addr().String(), http.StatusGatewayTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := startNginx(t, httptestutil.NginxConfig{Upstream: tt.upstream, ReadTimeout: 50 * time.Millisecond})
			// The proxy answers as the test expects.
			resp, err := http.Get(n.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("nginx answered %d; want %d", resp.StatusCode, tt.status)
			}
			client := &http.Client{Transport: &Transport{Throttle: &throttle.Throttle{}}}
			defer client.CloseIdleConnections()
			const ops = 300
			refused := throttledLoad(t, client, n.URL, ops, 8)
			got, err := n.Requests()
			if err != nil {
				t.Fatal(err)
			}
			got-- // the probe above
			if load := float64(got) / ops; load > 0.25 {
				t.Errorf("nginx logged %d requests for %d operations (%.2fx), %d refused locally; want at most 0.25x", got, ops, load, refused)
			}
		})
	}
}

// TestThrottleCountsACallerDeadlineOnASilentServerAsAStall: a server that
// never answers, called by clients that give up as Go callers usually do,
// with http.Client.Timeout or a context deadline (20ms), no
// AttemptTimeout, and the Transport's own Timeout; MinAttemptTime 10ms.
// An attempt whose caller's deadline expired while the server was silent,
// after MinAttemptTime, is a stall: of 300 operations, the server sees at
// most 40%.
func TestThrottleCountsACallerDeadlineOnASilentServerAsAStall(t *testing.T) {
	realTime(t)
	t.Parallel()
	for _, how := range []string{"http.Client.Timeout", "context deadline", "Transport.Timeout"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			var seen atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen.Add(1)
				<-r.Context().Done()
			}))
			defer srv.Close()
			tr := &Transport{Base: srv.Client().Transport, Throttle: &throttle.Throttle{}, MinAttemptTime: 10 * time.Millisecond}
			client := &http.Client{Transport: tr}
			switch how {
			case "http.Client.Timeout":
				client.Timeout = 20 * time.Millisecond
			case "Transport.Timeout":
				tr.Timeout = 20 * time.Millisecond
			}
			const ops = 300
			var wg sync.WaitGroup
			next := make(chan struct{})
			for range 10 {
				wg.Go(func() {
					for range next {
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						if how == "context deadline" {
							ctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
						}
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
						if resp, err := client.Do(req); err == nil {
							resp.Body.Close()
						}
						cancel()
					}
				})
			}
			for range ops {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			if load := float64(seen.Load()) / ops; load > 0.4 {
				t.Errorf("the silent server saw %d of %d operations (%.2fx); want at most 0.4x", seen.Load(), ops, load)
			}
		})
	}
}

// TestThrottleDoesNotCountACallerCancel: operations their caller cancels
// while the server is silent (an errgroup whose sibling failed) count for
// neither requests nor accepts: the caller left, the server said nothing.
func TestThrottleDoesNotCountACallerCancel(t *testing.T) {
	realTime(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	th := &throttle.Throttle{}
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Throttle: th}}
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Millisecond, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if _, err := client.Do(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", err)
		}
	}
	u, _ := url.Parse(srv.URL)
	if req, acc := throttleCounts(th, u.Host); req != 0 || acc != 0 {
		t.Errorf("after 20 canceled operations the throttle counted %v requests, %v accepts; want none", req, acc)
	}
}

// TestThrottlePausesForA403WithRetryAfter: GitHub answers its secondary
// rate limit with a 403, retry-after: 60, and its primary quota's fields
// (far from spent). The destination is paused: the next operation is
// refused locally with ErrQuotaExhausted, without reaching the server.
func TestThrottlePausesForA403WithRetryAfter(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		h := w.Header()
		h.Set("Retry-After", "60")
		h.Set("X-Ratelimit-Limit", "5000")
		h.Set("X-Ratelimit-Remaining", "4987")
		h.Set("X-Ratelimit-Reset", "1765000000")
		h.Set("X-Ratelimit-Used", "13")
		h.Set("X-Ratelimit-Resource", "core")
		h.Set("X-Github-Request-Id", "CA5E:2B4C:1F6E8:3A2B1:6750A1B2")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`))
	}))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Throttle: &throttle.Throttle{}}}
	resp, err := client.Get(srv.URL + "/search/code?q=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d; want 403", resp.StatusCode)
	}
	_, err = client.Get(srv.URL + "/search/code?q=y")
	if !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Errorf("the operation after the secondary rate limit: %v; want ErrQuotaExhausted", err)
	}
	if n := seen.Load(); n != 1 {
		t.Errorf("the server saw %d requests; want 1", n)
	}
}

// TestThrottleDoesNotCountACallerDeadlineShorterThanAnAttemptIsWorth:
// one Transport shared by two callers of a healthy server that answers
// in its own time: one gives each request 20ms (a cache lookup with a
// fallback), the other waits. An attempt its caller's deadline cut
// before MinAttemptTime (here 1s, so that a loaded machine cannot stretch
// a cut to it) says nothing of the server: it counts for neither, and
// the impatient caller's 40 cuts neither make the destination refuse the
// other caller (Rand 0: any positive probability refuses) nor show in the
// counts. A cut at or after MinAttemptTime stays a stall
// (TestThrottleCountsACallerDeadlineOnASilentServerAsAStall).
func TestThrottleDoesNotCountACallerDeadlineShorterThanAnAttemptIsWorth(t *testing.T) {
	realTime(t)
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/lookup" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	th := drawing(&throttle.Throttle{}, func() float64 { return 0 })
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Throttle: th, MinAttemptTime: time.Second}}
	for range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/lookup", nil)
		_, err := client.Do(req)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the impatient caller: err = %v; want context.DeadlineExceeded", err)
		}
	}
	u, _ := url.Parse(srv.URL)
	if req, acc := throttleCounts(th, u.Host); req != 0 || acc != 0 {
		t.Errorf("after 40 attempts cut at 20ms the throttle counted %v requests, %v accepts; want none", req, acc)
	}
	resp, err := client.Get(srv.URL + "/main")
	if err != nil {
		t.Fatalf("the patient caller: %v; want its answer", err)
	}
	resp.Body.Close()
}
