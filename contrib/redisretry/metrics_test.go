package redisretry

import (
	"context"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
)

// TestBudgetReadableByMetrics: the metric adapters read a Budget through
// metricsutil without importing this package: its tokens from Redis, and
// its state, shared and then local once Redis is gone.
func TestBudgetReadableByMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := server(t)
	b := newBudget(t, rdb, "metrics", 20, 0.1, perCall(Options{CallTimeout: 2 * time.Second, MaxProbeInterval: time.Hour}))
	tr := &httpretry.Transport{Budget: b}
	r, ok := metricsutil.TransportBudget(tr)
	if !ok {
		t.Fatal("metricsutil cannot read a redisretry Budget")
	}
	if !b.Withdraw(ctx) {
		t.Fatal("Withdraw from a full shared bucket refused")
	}
	if got, err := r.Tokens(ctx); err != nil || got != 19 {
		t.Errorf("Tokens() = %v, %v; want 19 after one withdrawal", got, err)
	}
	if state, ok := r.State(); !ok || state != metricsutil.StateShared {
		t.Errorf("State() = %q, %v; want shared", state, ok)
	}
	srv.Kill()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b.Withdraw(wctx) // fails against the dead server and falls back
	if state, ok := r.State(); !ok || state != metricsutil.StateLocal {
		t.Errorf("State() with Redis gone = %q, %v; want local", state, ok)
	}
	if _, err := r.Tokens(wctx); err == nil {
		t.Error("Tokens() with Redis gone returned no error")
	}
}
