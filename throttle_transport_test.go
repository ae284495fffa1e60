package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// countingBase answers every request with status and counts them, per
// host.
type countingBase struct {
	hits   atomic.Int64
	status func(req *http.Request) int
	header http.Header
}

func (b *countingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.hits.Add(1)
	h := b.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: b.status(req), Header: h, Body: http.NoBody, Request: req}, nil
}

// TestThrottledOperationFailsAtOnce: once a destination's failures make
// the throttle refuse, a refused operation makes no attempt, deposits
// nothing into the budget, closes the caller's body, and returns an
// *Error with Reason throttled that matches ErrThrottled through
// http.Client's *url.Error; Outcome and OnDone say so.
func TestThrottledOperationFailsAtOnce(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(*http.Request) int { return 503 }}
	var done []Outcome
	budget := NewTokenBucket(5, 1)
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Budget: budget,
		Throttle: &throttle.Throttle{Window: 800 * time.Millisecond, Rand: func() float64 { return 0 }},
		OnDone:   func(_ *http.Request, o Outcome) { done = append(done, o) }}
	client := &http.Client{Transport: tr}
	// MinRate's 1 a second over the 4s an 800ms window's counts reach
	// back when they hold fewer than 10 requests and no accept: 4
	// requests before any refusal.
	for i := range 4 {
		resp, err := client.Get("http://api.test/")
		if err != nil {
			t.Fatalf("request %d, below MinRate: %v; want it sent", i+1, err)
		}
		resp.Body.Close()
	}
	hits := base.hits.Load()
	withdrawBefore := budget.Tokens()
	payload := strings.NewReader("{}")
	body := &countingBody{Reader: payload}
	var o Outcome
	req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://api.test/", body)
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %d; want the operation refused", resp.StatusCode)
	}
	if !errors.Is(err, throttle.ErrThrottled) || errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Errorf("err = %v; want ErrThrottled, not ErrQuotaExhausted", err)
	}
	var herr *Error
	if !errors.As(err, &herr) || herr.Reason != Throttled || herr.Attempts != 0 || herr.Timeout() {
		t.Errorf("err = %#v; want *Error, throttled, 0 attempts, not a timeout", herr)
	}
	if got := base.hits.Load(); got != hits {
		t.Errorf("the server got %d more requests; want none", got-hits)
	}
	if o.Reason != Throttled || o.Attempts != 0 || done[len(done)-1].Reason != Throttled {
		t.Errorf("outcome %+v, OnDone %+v; want throttled after 0 attempts", o, done[len(done)-1])
	}
	if body.closes() != 1 || payload.Len() != 2 {
		t.Errorf("body closed %d times, %d of 2 bytes left; want closed once, unread", body.closes(), payload.Len())
	}
	if got := budget.Tokens(); got != withdrawBefore {
		t.Errorf("budget %v → %v; a refused operation deposits nothing", withdrawBefore, got)
	}
	if !strings.Contains(err.Error(), "0 attempts: throttled") {
		t.Errorf("message %q; want it to say 0 attempts: throttled", err)
	}
}

// TestThrottlePerHost: one host failing makes the throttle refuse its
// operations only; another host's are all sent.
func TestThrottlePerHost(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(r *http.Request) int {
		if r.URL.Host == "down.test" {
			return 503
		}
		return 200
	}}
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: evenDraws()}}
	reasons := map[string]map[StopReason]int{"down.test": {}, "up.test": {}}
	for range 200 {
		for host := range reasons {
			var o Outcome
			resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://"+host+"/", nil))
			if err == nil {
				resp.Body.Close()
			}
			reasons[host][o.Reason]++
		}
	}
	if got := reasons["up.test"]; got[Final] != 200 {
		t.Errorf("healthy host: %v; want 200 final", got)
	}
	if got := reasons["down.test"][Throttled]; got < 150 {
		t.Errorf("failing host: %v; want most of 200 throttled", reasons["down.test"])
	}
}

// TestThrottleRecoversOverLoopback: over a real socket, HTTP/1.1 and
// HTTP/2, a server that answers 503 for a while and then 200: while it
// fails most operations are refused locally without reaching it, and
// after it heals and a window passes every operation reaches it.
func TestThrottleRecoversOverLoopback(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		var failing atomic.Bool
		failing.Store(true)
		var hits atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			if failing.Load() {
				w.WriteHeader(503)
			}
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		defer srv.Close()
		th := &throttle.Throttle{}
		client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1, Throttle: th}}
		get := func() StopReason {
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
			return o.Reason
		}
		refused := 0
		for range 200 {
			if get() == Throttled {
				refused++
			}
		}
		if refused < 100 || hits.Load()+int64(refused) != 200 {
			t.Errorf("h2 %v: %d of 200 refused, %d reached the server; want most refused locally, the rest sent", h2, refused, hits.Load())
		}
		failing.Store(false)
		// Real time: the window forgets within a few windows; a busy
		// machine only makes the test wait longer, never fail.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && get() == Throttled {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * throttle.DefaultWindow)
		for i := range 50 {
			if r := get(); r != Final {
				t.Fatalf("h2 %v: after healing and two windows, operation %d: %s; want final", h2, i, r)
			}
		}
	}
}

// TestThrottleRefusesRetries: a retry passes the throttle's admission,
// after every other rule allowed it and before the budget. With one
// failure counted (p = 1/2) and a draw of 0, the retry is refused: the
// operation stops with throttled after its one attempt, returns that
// attempt's 503, and takes no budget token. With a draw above p, the
// retry is sent, and the refusal and the attempts are all counted as
// requests.
func TestThrottleRefusesRetries(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(*http.Request) int { return 503 }}
	var draw float64
	budget := NewTokenBucket(5, 1)
	th := &throttle.Throttle{MinRate: -1, Rand: func() float64 { return draw }}
	var done []Outcome
	var attempts []Attempt
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Budget: budget, Throttle: th, Jitter: waits(0),
		OnDone:    func(_ *http.Request, o Outcome) { done = append(done, o) },
		OnAttempt: func(_ *http.Request, a Attempt) { attempts = append(attempts, a) }}
	var o Outcome
	req := newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("refused retry: error %v; want the attempt's 503", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || o.Attempts != 1 || o.Reason != Throttled || base.hits.Load() != 1 {
		t.Errorf("refused retry: status %d, %d attempts, reason %s, %d hits; want 503, 1 attempt, throttled, 1 hit",
			resp.StatusCode, o.Attempts, o.Reason, base.hits.Load())
	}
	if got := budget.Tokens(); got != 5 {
		t.Errorf("budget holds %v tokens after a refused retry; want 5: no token taken", got)
	}
	if len(done) != 1 || done[0].Reason != Throttled || done[0].Attempts != 1 || len(attempts) != 1 || attempts[0].Wait != 0 {
		t.Errorf("OnDone %+v, OnAttempt %+v; want one of each: throttled after 1 attempt, no wait after it", done, attempts)
	}
	reqs, acc := th.Counts("api.test")
	if reqs != 2 || acc != 0 {
		t.Errorf("counts %v requests, %v accepts; want 2 (the attempt and the refused retry), 0", reqs, acc)
	}
	// p is now min(0.9, 2/3); a draw at 0.9 admits everything.
	draw = 0.9
	req = newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o.Attempts != 3 || o.Reason != AttemptsExhausted || base.hits.Load() != 4 {
		t.Errorf("admitted retries: %d attempts, reason %s, %d hits; want 3, attempts_exhausted, 4", o.Attempts, o.Reason, base.hits.Load())
	}
	reqs, _ = th.Counts("api.test")
	if reqs != 5 {
		t.Errorf("counts %v requests; want 5: every attempt and the refusal", reqs)
	}
}
