package httpretry

import (
	"errors"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack5QuotaRenewedGuessDoesNotCapTheServersCount: a process starts
// late in an hourly window (others spent 97 of 100; the server sends no
// Limit field, as docs/overload.md allows: "else the most a window was
// seen to hold"). It learns a size of 3. At the reset the window is
// renewed with 3, "until responses say more" (docs/overload.md). The new
// window's first response says 99 remain, with the same reset as the
// renewed window; the late-answer rule (count never rises within a
// window) keeps the guess of 3 as the server's count, so for the whole
// hour no more than 3 callers may be in flight: 7 of 10 concurrent
// callers are refused while the server has 99 left.
func TestAttack5QuotaRenewedGuessDoesNotCapTheServersCount(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &meteredRouteServer{fixedWindow: newFixedWindow(fc, 100, time.Hour), tooMany: map[int64]int{}}
	srv.used = 97
	g := &gatedBase{base: srv}
	tr := &Transport{Base: g, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	call := func() error { return get(t, tr, "https://api.test/m") }
	for range 3 {
		call() // 2, 1, 0 remain
	}
	if err := call(); !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Fatalf("quota spent (X-RateLimit-Remaining: 0): err = %v, want ErrQuotaExhausted", err)
	}
	fc.Advance(time.Hour) // the server's new window: 100
	if err := call(); err != nil {
		t.Fatalf("first request of the new window: %v", err)
	}
	srv.mu.Lock()
	said := srv.lastR // 99, same reset as the renewed window
	srv.mu.Unlock()
	const callers = 10
	refused := g.burst(callers, call)
	if refused > 0 {
		t.Errorf("new hourly window, the server's answer (same reset as the renewed window) said %d of 100 remain; then %d concurrent callers: %d refused locally; want none (docs/overload.md: renewed with the most a window was seen to hold, 3 here, \"until responses say more\"; a healthy server with quota left must not be refused: the guess caps the hour at 3 in flight)", said, callers, refused)
	}
}
