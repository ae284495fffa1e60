package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// quotaServer is a Base with a quota of limit requests per window,
// windows starting at the clock's zero, announced in RateLimit and
// RateLimit-Policy; past the quota it answers 429.
type quotaServer struct {
	fixedWindow
	mu      sync.Mutex
	hits    map[int64]int // requests per window
	tooMany map[int64]int // 429s per window
}

func (q *quotaServer) RoundTrip(req *http.Request) (*http.Response, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, admitted, left, reset := q.take()
	q.hits[n]++
	status := 200
	if !admitted {
		status = 429
		q.tooMany[n]++
	}
	h := http.Header{
		"Ratelimit-Policy": {fmt.Sprintf(`"default";q=%d;w=%d`, q.limit, q.window/time.Second)},
		"Ratelimit":        {fmt.Sprintf(`"default";r=%d;t=%d`, left, reset)},
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// TestQuotaAtMostOne429PerWindow: a server with a quota of 100 requests
// a second, offered 300 operations a second for 10 s: at most one 429
// per window, and the quota is used: the operations refused locally
// match ErrQuotaExhausted and ErrThrottled and stop with throttled.
func TestQuotaAtMostOne429PerWindow(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := &quotaServer{fixedWindow: newFixedWindow(fc, 100, time.Second),
		hits: map[int64]int{}, tooMany: map[int64]int{}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{}}
	ok, refused := 0, 0
	for range 3000 {
		var o Outcome
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
		switch {
		case err == nil:
			if resp.StatusCode == 200 {
				ok++
			}
			resp.Body.Close()
		case errors.Is(err, throttle.ErrQuotaExhausted) && errors.Is(err, throttle.ErrThrottled) && o.Reason == Throttled:
			refused++
		default:
			t.Fatalf("err = %v, reason %s; want ErrQuotaExhausted and throttled", err, o.Reason)
		}
		fc.Advance(time.Second / 300)
	}
	for w, n := range srv.tooMany {
		if n > 1 {
			t.Errorf("window %d: %d 429s; want at most 1", w, n)
		}
	}
	// The server's reset in whole seconds may hold a window back by
	// up to a second's fraction: most of each quota is still used.
	if ok < 900 {
		t.Errorf("%d of 3000 succeeded in 10 windows of 100; want the quota mostly used", ok)
	}
	if ok+refused+len(srv.tooMany) < 3000-10 {
		t.Errorf("%d succeeded, %d refused, 429s in %d windows; want every operation accounted for", ok, refused, len(srv.tooMany))
	}
	t.Logf("succeeded %d, refused locally %d, 429s %v", ok, refused, srv.tooMany)
}

// TestQuotaWait: with WaitQuota, an operation whose quota is spent waits
// for the reset and is then sent; without time for it before the
// deadline it is refused at once.
func TestQuotaWait(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := quotaSpentOnce(func() {})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{WaitQuota: true}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first: %v, %v; want the 429", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var o Outcome
	_, err = tr.RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil))
	if !errors.Is(err, throttle.ErrQuotaExhausted) || o.Attempts != 0 {
		t.Fatalf("with 1s left and the reset 2s away: %v after %d attempts; want ErrQuotaExhausted at once", err, o.Attempts)
	}
	o = Outcome{}
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 2*time.Second)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 || o.Waited != 2*time.Second {
		t.Fatalf("held: %v, %v, waited %v; want 200 after waiting 2s", r.resp, r.err, o.Waited)
	}
}
