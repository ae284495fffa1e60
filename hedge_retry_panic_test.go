package httpretry

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestHedgedRetryHookPanicKeepsTheCounts: over HTTP/2 (TLS, loopback),
// the first attempt of a hedged operation waits at the server until the
// hedge arrives, then both answer 503: a retry follows, after a wait. A
// hook panics on the way: the Logger's handler on the record of the
// hedge (both attempts in flight), Jitter as the retry is planned, OnWait
// after the wait, before the retry leaves. RoundTrip raises the panic, on
// the operation's first attempt sent directly and through the loop
// alike; every response is closed once, and the budget keeps the
// hedge's token, sent, and gets back the retry's, never sent.
func TestHedgedRetryHookPanicKeepsTheCounts(t *testing.T) {
	t.Parallel()
	boom := func() { panic("hook broke") }
	for _, c := range []struct {
		name                string
		set                 func(tr *Transport)
		hits                int32
		withdrawn, refunded int32
	}{
		{"Logger on the hedge", func(tr *Transport) { tr.Logger = slog.New(panicking{msg: "httpretry: hedge"}) }, 0, 1, 0},
		{"Jitter", func(tr *Transport) { tr.Jitter = func(time.Duration) time.Duration { boom(); return 0 } }, 2, 1, 0},
		{"OnWait", func(tr *Transport) { tr.OnWait = func(*http.Request, Wait) { boom() } }, 2, 2, 1},
		{"Logger on the retry", func(tr *Transport) { tr.Logger = slog.New(panicking{msg: "httpretry: retry"}) }, 2, 2, 1},
	} {
		for _, direct := range []bool{true, false} {
			name := c.name + map[bool]string{true: "/direct", false: "/loop"}[direct]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var hits atomic.Int32
				hedged, arrived := make(chan struct{}), make(chan struct{})
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					switch hits.Add(1) {
					case 1:
						close(arrived)
						select {
						case <-hedged:
						case <-r.Context().Done():
							return
						}
					case 2:
						close(hedged)
					}
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusServiceUnavailable)
				}))
				srv.EnableHTTP2 = true
				srv.StartTLS()
				defer srv.Close()
				inner := srv.Client().Transport.(*http.Transport)
				defer inner.CloseIdleConnections()
				var closes atomic.Int32
				base := &respTally{rt: countingCloses(inner, &closes)}
				b := &countingBudget{}
				fc := clockwork.NewFakeClock()
				tr := &Transport{Base: base, Budget: b, MaxAttempts: 3, Clock: fc,
					Hedging: &Hedging{Delay: 5 * time.Millisecond, MaxExtraLoad: 1}}
				ctx, stop := context.WithCancel(context.Background())
				defer stop()
				go func() {
					// The hedge fires once the first attempt reached the
					// server; the wait for the retry passes once both
					// answered and the retry waits.
					select {
					case <-arrived:
					case <-ctx.Done():
						return
					}
					advance(t, fc, 1, 5*time.Millisecond)
					for base.resps.Load() < 2 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(time.Millisecond):
						}
					}
					// The loop's hedge timer, set for the Retry-After, and
					// the retry's wait.
					if fc.BlockUntilContext(ctx, 2) == nil {
						fc.Advance(10 * time.Second) // past the Retry-After and any backoff
					}
				}()
				c.set(tr)
				if !direct {
					tr.OnAttemptStart = func(*http.Request, int) {}
				}
				req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
				if p := roundTripPanics(t, tr, req); p != "hook broke" {
					t.Fatalf("recovered %v; want the hook's panic", p)
				}
				if n := hits.Load(); c.hits != 0 && n != c.hits {
					t.Errorf("%d requests reached the server; want %d", n, c.hits)
				}
				// A response set aside is drained and closed on a
				// goroutine of its own: it may close after the panic.
				for end := time.Now().Add(hangGuardBody); closes.Load() < base.resps.Load() && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
				}
				if n, want := closes.Load(), base.resps.Load(); n != want {
					t.Errorf("%d closes of %d responses; want each closed once", n, want)
				}
				if w, r := b.withdrawn.Load(), b.refunded.Load(); w != c.withdrawn || r != c.refunded {
					t.Errorf("budget: %d withdrawn, %d refunded; want %d and %d", w, r, c.withdrawn, c.refunded)
				}
			})
		}
	}
}

// respTally counts the responses rt returns.
type respTally struct {
	rt    http.RoundTripper
	resps atomic.Int32
}

func (b *respTally) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if resp != nil {
		b.resps.Add(1)
	}
	return resp, err
}
