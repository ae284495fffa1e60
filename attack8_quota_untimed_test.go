package httpretry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack8QuotaUntimed429LateRefusesLiveWindow: 5 s windows of 5. An
// operation sent at 4.4 s, before the quota was known (untimed), is
// counted at 4.6 s and gets the window's 429 ("0 left, reset in 1"). A
// request at 4.5 s learns the quota with "reset in 1" (period learned
// 1 s); at 5.6 s a request renews it and the server's answer ("4 left,
// reset in 5") sets the held window to end at 10.6 s (period 5 s). The
// untimed 429 is read at 8 s: placed at its read, it says the quota is
// spent until 9 s, and replaces the held window, though the server's
// window [5 s, 10 s) has 4 left: the process refuses requests 3 s after
// the reset.
func TestAttack8QuotaUntimed429LateRefusesLiveWindow(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv := newSlowQuotaServer(fc, 5*time.Second, 5)
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	ctx := context.Background()
	fc.Advance(4400 * time.Millisecond) // 4.4 s: nothing known yet
	slow := start(tr, newRequest(t, ctx, "GET", "http://api.test/slow", nil))
	waitClosed(t, srv.arrived, "the slow request's arrival")
	fc.Advance(100 * time.Millisecond) // 4.5 s: the quota becomes known, 1 left
	srv.spendOther(3)
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil {
		t.Fatalf("request at 4.5 s: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 4.6 s: another process spends the last; the slow one is counted
	srv.spendOther(1)
	close(srv.count)
	waitClosed(t, srv.counted, "the slow request's count")
	fc.Advance(time.Second) // 5.6 s: the new window
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil {
		t.Fatalf("the first request of the new window was refused: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(2400 * time.Millisecond) // 8 s: the slow 429 is read
	close(srv.release)
	if r := await(t, slow); r.err != nil {
		t.Fatalf("slow request: %v", r.err)
	} else {
		if r.resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the slow request got %d, want the window's 429", r.resp.StatusCode)
		}
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 8.1 s
	left := srv.leftIn(1)
	refused := 0
	var first error
	for range 3 {
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			if errors.Is(r.err, throttle.ErrQuotaExhausted) {
				refused++
			}
			first = cmpOr(first, r.err)
			continue
		}
		r.resp.Body.Close()
	}
	if refused > 0 {
		t.Errorf("at 8.1 s, 3.1 s after the server's reset, with %d of its window of 5 left, %d of 3 requests were refused locally (%v); want none: quota pacing must not refuse a server that has quota left. The untimed 429 read at 8 s (counted at 4.6 s, reset in 1) was placed at its read and replaced the held window (ending 10.6 s, set by a timed answer) with one spent until 9 s", left, refused, first)
	}
}
