package spread_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
	"github.com/httpretry/httpretry/throttle"
)

// TestThrottleAndPerHostBudgetOverSpreadSeeOneHost: httpretry with its
// throttle and a budget per host, over spread, while one of four
// backends is dead (its connections refused, an overload signal for the
// throttle). Every operation succeeds: the throttle, which counts the
// host as a whole, refuses none, and the budget pays only the retries of
// the attempts the dead address refused before its ejection, at most
// EjectAfter of them among 200 operations.
func TestThrottleAndPerHostBudgetOverSpreadSeeOneHost(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls})
			sp := newSpread(t, g)
			rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, BudgetPerHost: true, Throttle: &throttle.Throttle{}, Jitter: noWait}
			connectAll(t, rt, g)
			g.Kill(0)
			attempts := 0
			for i := range 200 {
				var o httpretry.Outcome
				req, _ := http.NewRequestWithContext(httpretry.WithOutcome(context.Background(), &o), http.MethodGet, g.URL+"/op", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatalf("op %d: %v (%+v)", i, err, o)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("op %d: status %d", i, resp.StatusCode)
				}
				attempts += o.Attempts
			}
			if retries := attempts - 200; retries < 1 || retries > spread.DefaultEjectAfter {
				t.Fatalf("%d retries, want 1 to %d: those of the dead address before its ejection", retries, spread.DefaultEjectAfter)
			}
		})
	}
}
