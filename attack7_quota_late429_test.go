package httpretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack7QuotaLate429AfterRenewalRefusesFreshWindow: another
// process spends one of the window's 5 unseen, so this process's fifth
// request, sent at 9.6 s with one left by its count, meets the window's
// one 429 ("0 left, reset in 1"), read 0.1 s after the reset. By then the
// window was renewed here (a request at 10.05 s was admitted from the new
// window of 5). quotaUpdate does not ignore a 429 sent before the held
// window began, and sameWindow cannot place it in the held window (its
// reset is 9 s short of it), so the late 429 replaces the renewed window
// with a fictitious one ending at 11.1 s with nothing left: requests are
// refused locally while the server's new window has 4 left.
func TestAttack7QuotaLate429AfterRenewalRefusesFreshWindow(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv := newSlowQuotaServer(fc, 10*time.Second, 5)
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	ctx := context.Background()
	for i := range 4 { // 4 of the 5, at 0, 1, 2, 3 s
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(time.Second)
	}
	fc.Advance(time.Second) // 5 s: another process spends the last one
	srv.spendOther(1)
	fc.Advance(4600 * time.Millisecond) // 9.6 s: one left by this process's count
	slow := start(tr, newRequest(t, ctx, "GET", "http://api.test/slow", nil))
	waitClosed(t, srv.arrived, "the slow request's arrival")
	close(srv.count)
	waitClosed(t, srv.counted, "the slow request's count")
	fc.Advance(450 * time.Millisecond) // 10.05 s: a new window at the server and here
	if r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))); r.err != nil {
		t.Fatalf("the first request of the new window was refused: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(50 * time.Millisecond) // 10.1 s: the late 429 is read
	close(srv.release)
	if r := await(t, slow); r.err != nil {
		t.Fatalf("slow request: %v", r.err)
	} else {
		if r.resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the slow request got %d, want the window's 429", r.resp.StatusCode)
		}
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 10.2 s
	if refused, err := attack7Refused(t, tr, 3); refused > 0 {
		t.Errorf("at 10.2 s, with 4 of the server's new window of 5 left, %d of 3 requests were refused locally (%v); want none: the 429 read at 10.1 s was the last window's (sent at 9.6 s, reset in 1), yet it replaced the renewed window with one ending at 11.1 s with nothing left (docs/overload.md: quota pacing must not refuse a server that has quota left)", refused, err)
	}
}
