package spread_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestRetryOfAResetGoesToAnotherAddress: one of four backends resets every
// request (HTTP/1.1: the connection; HTTP/2 over TLS: the stream, on the
// one connection to it). With ejection off, so that the failing backend
// keeps getting first attempts, every operation that reached it was
// retried on another backend and succeeded there.
func TestRetryOfAResetGoesToAnotherAddress(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			var log opLog
			g := startGroup(t, spreadtest.Options{TLS: tls, OnRequest: log.record})
			g.Backends[0].Set(spreadtest.Reset)
			sp := newSpread(t, g)
			sp.EjectAfter = -1
			rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, Budget: httpretry.NewTokenBucket(1000, 1), Jitter: noWait}
			const ops = 120
			reachedFailing := 0
			for i := range ops {
				op := fmt.Sprint(i)
				resp, body, err := getOp(t, rt, g, op)
				if err != nil {
					t.Fatalf("op %d: %v (backends %v)", i, err, log.backends(op))
				}
				if resp.StatusCode != 200 || body == g.Backends[0].Addr.String() {
					t.Fatalf("op %d: %d %q, want 200 from a healthy backend", i, resp.StatusCode, body)
				}
				seen := log.backends(op)
				if !slices.Contains(seen, 0) {
					continue
				}
				reachedFailing++
				if last := seen[len(seen)-1]; last == 0 {
					t.Fatalf("op %d: backends %v: the retry went back to the failing one", i, seen)
				}
			}
			// About a quarter of first attempts go to each backend: with
			// 120 operations, fewer than 5 would be a broken draw.
			if reachedFailing < 5 {
				t.Fatalf("%d of %d operations reached the failing backend, want at least 5", reachedFailing, ops)
			}
		})
	}
}

// TestHedgeOfASlowAttemptGoesToAnotherAddress: one of four backends
// answers in five seconds. A hedge sent 20 ms into an operation never goes to
// an address the operation already tried: no backend gets two requests of
// one operation, and every operation that reached the slow backend was
// answered by another before the slow one could answer. (MaxExtraLoad
// near 1: the cap on hedges must refuse none of the quarter of operations
// that reach the slow backend.)
func TestHedgeOfASlowAttemptGoesToAnotherAddress(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			var log opLog
			g := startGroup(t, spreadtest.Options{TLS: tls, OnRequest: log.record, Slow: 5 * time.Second})
			g.Backends[0].Set(spreadtest.Slow)
			sp := newSpread(t, g)
			rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, Budget: httpretry.NewTokenBucket(1000, 1),
				Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond, MaxExtraLoad: 0.99}}
			const ops = 60
			reachedSlow := 0
			for i := range ops {
				op := fmt.Sprint(i)
				start := time.Now()
				resp, body, err := getOp(t, rt, g, op)
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				seen := log.backends(op)
				if resp.StatusCode != 200 || body == g.Backends[0].Addr.String() {
					t.Fatalf("op %d: %d %q after %v, want 200 from a fast backend (backends %v)", i, resp.StatusCode, body, time.Since(start), seen)
				}
				for _, b := range seen {
					if n := count(seen, b); n > 1 {
						t.Fatalf("op %d: backends %v: backend %d got %d requests", i, seen, b, n)
					}
				}
				if slices.Contains(seen, 0) {
					reachedSlow++
					// The slow backend answers after 5 s: an answer in
					// less proves it came from the hedge, whatever the
					// machine's load.
					if d := time.Since(start); d >= 5*time.Second {
						t.Fatalf("op %d took %v: it waited for the slow backend", i, d)
					}
				}
			}
			if reachedSlow < 3 {
				t.Fatalf("%d of %d operations reached the slow backend, want at least 3", reachedSlow, ops)
			}
		})
	}
}

func count(xs []int, x int) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestRetryAfterAnInstanceDiedGoesToAnotherAddress: one of four backends
// dies after every address has a pooled connection (its connections
// close, new ones are refused). Every operation succeeds, and the dead
// address is ejected after its failures: it is dialed no more than the
// ejection threshold allows.
func TestRetryAfterAnInstanceDiedGoesToAnotherAddress(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls})
			sp := newSpread(t, g)
			var refusedMu sync.Mutex
			refused := 0
			base := sp.New
			sp.New = func() *http.Transport {
				tr := base()
				dial := (&net.Dialer{}).DialContext
				tr.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
					c, err := dial(ctx, network, address)
					if err != nil && address == netip.AddrPortFrom(g.Backends[0].Addr, uint16(g.Port)).String() {
						refusedMu.Lock()
						refused++
						refusedMu.Unlock()
					}
					return c, err
				}
				return tr
			}
			rt := &httpretry.Transport{Base: sp, MaxAttempts: 2}
			connectAll(t, rt, g)
			g.Kill(0)
			for i := range 200 {
				if _, _, err := getOp(t, rt, g, fmt.Sprint("after-", i)); err != nil {
					t.Fatalf("op %d after the instance died: %v", i, err)
				}
			}
			refusedMu.Lock()
			defer refusedMu.Unlock()
			if refused == 0 || refused > spread.DefaultEjectAfter {
				t.Fatalf("the dead address was dialed and refused %d times, want 1 to %d", refused, spread.DefaultEjectAfter)
			}
		})
	}
}

// noWait makes every backoff wait 0: the tests are about where a retry
// goes, not when.
func noWait(time.Duration) time.Duration { return 0 }
