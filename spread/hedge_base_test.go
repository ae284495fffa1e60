package spread_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestHedgeThroughSpreadAvoidsTheAddressOfAFirstAttemptSentElsewhere:
// spread is only Hedging.Base; the first attempts go through a Base of
// the caller's own, whose dialer reaches one backend, which answers in
// five seconds. The address that first attempt's connection reached
// counts as tried: every hedge, sent once the slow backend has the first
// attempt (the hedge delay runs on a fake clock), goes to another
// address, and no operation waits for the slow backend.
func TestHedgeThroughSpreadAvoidsTheAddressOfAFirstAttemptSentElsewhere(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			var log opLog
			g := startGroup(t, spreadtest.Options{TLS: tls, OnRequest: log.record, Slow: 5 * time.Second})
			slow := g.Backends[0]
			slow.Set(spreadtest.Slow)
			base := cleanhttp.DefaultPooledTransport()
			base.Proxy = nil
			base.TLSClientConfig = g.TLSConfig()
			base.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort(slow.Addr.String(), fmt.Sprint(g.Port)))
			}
			t.Cleanup(base.CloseIdleConnections)
			sp := newSpread(t, g)
			fc := clockwork.NewFakeClock()
			const delay = 20 * time.Millisecond
			rt := &httpretry.Transport{Base: base, MaxAttempts: 2, Budget: httpretry.NewTokenBucket(1000, 1), Clock: fc,
				Hedging: &httpretry.Hedging{Delay: delay, MaxExtraLoad: 0.99, Base: sp}}
			for i := range 20 {
				op := fmt.Sprint(i)
				type result struct {
					body string
					err  error
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					resp, body, err := getOp(t, rt, g, op)
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
					done <- result{body, err}
				}()
				waitFor(t, "the first attempt at the slow backend", func() bool { return count(log.backends(op), slow.Index) == 1 })
				var r result
				for waiting := true; waiting; {
					fc.Advance(delay)
					select {
					case r = <-done:
						waiting = false
					case <-time.After(10 * time.Millisecond):
					}
				}
				seen := log.backends(op)
				if r.err != nil {
					t.Fatalf("op %d: %v (backends %v)", i, r.err, seen)
				}
				if r.body == slow.Addr.String() {
					t.Fatalf("op %d: answered by the slow backend after %v (backends %v)", i, time.Since(start), seen)
				}
				if count(seen, slow.Index) > 1 {
					t.Fatalf("op %d: backends %v: the hedge went to the first attempt's address", i, seen)
				}
			}
		})
	}
}
