package httpretry

import (
	"context"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// attack7Refused sends n requests at the fake clock's time and returns
// how many were refused, and the first error.
func attack7Refused(t *testing.T, tr *Transport, n int) (int, error) {
	t.Helper()
	refused := 0
	var firstErr error
	for range n {
		r := await(t, start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil)))
		if r.err != nil {
			refused++
			firstErr = cmpOr(firstErr, r.err)
			continue
		}
		r.resp.Body.Close()
	}
	return refused, firstErr
}

// TestAttack7QuotaUntimedLateAnswerRefusesFreshWindow: the operation
// whose answer arrives late was admitted while its destination was idle
// (no quota known yet), so its attempt never read the clock when sent
// (op.timed false; admitFirst returns before setting it), and
// quotaUpdate takes sent = now. Its answer, counted by the server 0.4 s
// before the reset ("0 left, reset in 1") and read 0.1 s after it, is
// then placed at the read alone and taken as a new window with nothing
// left: the attack6 break 2 fix does not cover operations whose quota
// became known mid-operation. docs/overload.md: "an answer read just
// after a reset, for a request the server counted just before it, is the
// old window's last word, not a new window with nothing left".
func TestAttack7QuotaUntimedLateAnswerRefusesFreshWindow(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv := newSlowQuotaServer(fc, 10*time.Second, 5)
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	ctx := context.Background()
	// At 0 s, to an idle destination: a slow request the server counts
	// only at 9.6 s.
	slow := start(tr, newRequest(t, ctx, "GET", "http://api.test/slow", nil))
	waitClosed(t, srv.arrived, "the slow request's arrival")
	for i := range 4 { // 4 of the 5, at 0, 1, 2, 3 s: the quota is known
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(time.Second)
	}
	fc.Advance(5600 * time.Millisecond) // 9.6 s
	close(srv.count)
	waitClosed(t, srv.counted, "the slow request's count")
	fc.Advance(500 * time.Millisecond) // 10.1 s: the server's window renewed
	close(srv.release)
	if r := await(t, slow); r.err != nil {
		t.Fatalf("slow request: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 10.2 s
	if refused, err := attack7Refused(t, tr, 4); refused > 0 {
		t.Errorf("at 10.2 s, in a new 10 s window whose 5 requests the server has not started on, %d of 4 requests were refused locally (%v); want none: the slow answer read at 10.1 s (0 left, reset in 1) of an operation admitted before the quota was known was counted before the reset, yet it was taken as a new window with nothing left (docs/overload.md: quota pacing must not refuse a server that has quota left; a late answer is the old window's last word)", refused, err)
	}
}
