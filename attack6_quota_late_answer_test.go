package httpretry

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack6QuotaLateAnswerRefusesFreshWindow: a quota of 5 per 10 s
// window announced with X-RateLimit-Remaining / -Reset (delta seconds,
// rounded up). The fifth request of the window is counted by the server
// 0.4 s before the reset and its answer ("0 left, reset in 1") is read
// 0.1 s after it: the server's new window holds all 5. docs/overload.md
// and issue 23: quota pacing must not refuse a server that has quota
// left; a late answer says nothing new. But the late answer, its reset
// more than quotaSame from the window held, is taken as a new window
// with nothing left: every request is refused locally with
// ErrQuotaExhausted for a second while the server would admit 5.
func TestAttack6QuotaLateAnswerRefusesFreshWindow(t *testing.T) {
	fc := clockwork.NewFakeClock()
	t0 := fc.Now()
	var hits atomic.Int32
	gate := make(chan struct{})
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := hits.Add(1)
		resp := response(req, 200, "ok")
		if n == 5 {
			<-gate // counted now; its answer is read after the reset
			resp.Header.Set("X-RateLimit-Remaining", "0")
			resp.Header.Set("X-RateLimit-Reset", "1")
			return resp, nil
		}
		// The server's count: windows of 10 s from t0, 5 each.
		el := fc.Since(t0)
		used := 1 + (n-1)%5
		if el >= 10*time.Second {
			used = n - 5
		}
		reset := int((10*time.Second - el%(10*time.Second) + time.Second - 1) / time.Second)
		resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(5-int(used)))
		resp.Header.Set("X-RateLimit-Reset", strconv.Itoa(reset))
		return resp, nil
	})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	ctx := context.Background()
	for i := range 4 { // 4 of the 5, at 0, 1, 2, 3 s
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		r.resp.Body.Close()
		fc.Advance(time.Second)
	}
	fc.Advance(5600 * time.Millisecond) // 9.6 s: the fifth is sent
	ch := start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))
	for hits.Load() < 5 {
		time.Sleep(50 * time.Microsecond) // a poll, not a timing assumption
	}
	fc.Advance(500 * time.Millisecond) // 10.1 s: the server's window renewed
	close(gate)
	if r := await(t, ch); r.err != nil {
		t.Fatalf("request 5: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	fc.Advance(100 * time.Millisecond) // 10.2 s
	refused := 0
	var firstErr error
	for range 4 {
		r := await(t, start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil)))
		if r.err != nil {
			refused++
			firstErr = cmpOr(firstErr, r.err)
			continue
		}
		r.resp.Body.Close()
	}
	if refused > 0 {
		t.Errorf("at 10.2 s, in a new 10 s window whose 5 requests the server has not started on, %d of 4 requests were refused locally (%v); want none: the answer read at 10.1 s (0 left, reset in 1) was counted before the reset, yet it was taken as a new window with nothing left (docs/overload.md: quota pacing must not refuse a server that has quota left)", refused, firstErr)
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
