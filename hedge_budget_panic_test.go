package httpretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestHedgeBudgetPanicGivesBackTheExtraLoadToken: over HTTP/1.1 and
// HTTP/2 (TLS, loopback), the first attempt hangs until it is canceled;
// the hedge delay passes on a fake clock, the extra-load cap grants the
// hedge a token, and the Budget's Withdraw panics for it. RoundTrip
// raises the panic once the first attempt has ended; the hedge was never
// sent, so the extra-load token taken for it is given back: the cap is as
// full as before, as it is when a hook panics before a hedge leaves.
func TestHedgeBudgetPanicGivesBackTheExtraLoadToken(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "http2"}[h2], func(t *testing.T) {
			t.Parallel()
			srv, inner, hits, first := hangingTLSServer(t, h2)
			fc := clockwork.NewFakeClock()
			tr := &Transport{Base: inner, Budget: failingBudget{where: "withdraw"}, MaxAttempts: 3, Clock: fc,
				Hedging: &Hedging{Delay: 5 * time.Millisecond}}
			go func() {
				<-first
				advance(t, fc, 1, 5*time.Millisecond)
			}()
			req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			if p := roundTripPanics(t, tr, req); p != "Withdraw broke" {
				t.Fatalf("recovered %v; want the Budget's panic", p)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("%d requests reached the server; want the first only", n)
			}
			if got := tr.latencies().LookupHost(req).ExtraTokens(); got != hedgeBurst {
				t.Errorf("%v extra-load tokens after the unsent hedge; want the cap full again (%d)", got, hedgeBurst)
			}
		})
	}
}
