package spread_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestHedgeThroughSpreadAvoidsTheAddressOfAFirstAttemptSentElsewhere:
// spread is only Hedging.Base; the first attempts go through a Base of
// the caller's own, whose dialer reaches one backend, which answers in
// five seconds. The address that first attempt's connection reached
// counts as tried: every hedge goes to another address, and no
// operation waits for the slow backend.
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
			rt := &httpretry.Transport{Base: base, MaxAttempts: 2, Budget: httpretry.NewTokenBucket(1000, 1),
				Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond, MaxExtraLoad: 0.99, Base: sp}}
			for i := range 40 {
				op := fmt.Sprint(i)
				start := time.Now()
				resp, body, err := getOp(t, rt, g, op)
				seen := log.backends(op)
				if err != nil {
					t.Fatalf("op %d: %v (backends %v)", i, err, seen)
				}
				if resp.StatusCode != 200 || body == slow.Addr.String() {
					t.Fatalf("op %d: %d %q after %v, want 200 from a fast backend", i, resp.StatusCode, body, time.Since(start))
				}
				if count(seen, slow.Index) > 1 {
					t.Fatalf("op %d: backends %v: the hedge went to the first attempt's address", i, seen)
				}
			}
		})
	}
}
