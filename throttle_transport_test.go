package httpretry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
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
		Throttle: drawing(&throttle.Throttle{Window: 800 * time.Millisecond}, func() float64 { return 0 }),
		OnDone:   func(_ *http.Request, o Outcome) { done = append(done, o) }}
	client := &http.Client{Transport: tr}
	// The throttle refuses nothing on fewer than 10 requests counted:
	// 10 requests before any refusal.
	for i := range 10 {
		resp, err := client.Get("http://api.test/")
		if err != nil {
			t.Fatalf("request %d, of the 10 the throttle needs: %v; want it sent", i+1, err)
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
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, evenDraws())}
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
	secondsOfRealTime(t)
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
	th := drawing(&throttle.Throttle{MinRate: -1}, func() float64 { return draw })
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
	reqs, acc := throttleCounts(th, "api.test")
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
	reqs, _ = throttleCounts(th, "api.test")
	if reqs != 5 {
		t.Errorf("counts %v requests; want 5: every attempt and the refusal", reqs)
	}
}

// TestThrottleBurstAfterAQuietSpellIsNotRefused: a destination called
// once, then not for ten minutes, then 60 times in 600ms, all accepted,
// then answering one 503. The window (600ms) holds 60 accepts and 1
// failure: the SRE form gives p = max(0, (61 − 2·60)/62) = 0, so the next
// operation is admitted. Accepts counted without the clock are spread over
// no more than the ring's span when folded, never over the quiet ten
// minutes.
func TestThrottleBurstAfterAQuietSpellIsNotRefused(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var status atomic.Int64
	status.Store(200)
	base := &countingBase{status: func(*http.Request) int { return int(status.Load()) }}
	// A draw of 0.1: refused only when p > 0.1.
	th := drawing(&throttle.Throttle{}, func() float64 { return 0.1 })
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: th}
	call := func() error { return get(t, tr, "http://api.test/") }
	if err := call(); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Minute)
	for range 60 {
		if err := call(); err != nil {
			t.Fatalf("burst: %v", err)
		}
		fc.Advance(10 * time.Millisecond)
	}
	status.Store(503)
	if err := call(); err != nil {
		t.Fatalf("the 503: %v", err)
	}
	status.Store(200)
	if err := call(); errors.Is(err, throttle.ErrThrottled) {
		req, acc := throttleCounts(th, "api.test")
		t.Errorf("after 60 accepts and 1 failure in the last 600ms: %v; want admitted: the README says the throttle refuses with p = (requests − K·accepts)/(requests + 1) over its window (here 0) and that a healthy phase refuses nothing; the window (this refusal included) credits %.3f accepts against %.3f requests", err, acc, req)
	}
}

// TestThrottleInfiniteMinRateTakesTheDefault: a MinRate of +Inf takes its
// default, 1 a second, as a field that is 0, NaN or infinite does: a
// destination failing every one of 200 operations at 1000 a second is
// refused.
func TestThrottleInfiniteMinRateTakesTheDefault(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{math.Inf(1), 0} {
		fc := clockwork.NewFakeClock()
		base := &countingBase{status: func(*http.Request) int { return 503 }}
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{MinRate: rate}, evenDraws())}
		refused := 0
		for range 200 {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if errors.Is(err, throttle.ErrThrottled) {
				refused++
			} else if err == nil {
				resp.Body.Close()
			}
			fc.Advance(time.Millisecond)
		}
		if refused < 100 {
			t.Errorf("MinRate %v: %d of 200 operations to a destination answering only 503 refused; want most (docs/overload.md: an infinite field takes its default, MinRate 1/s)", rate, refused)
		}
	}
}

// TestThrottleHedgeLoserCountsAsARequest: a hedged operation whose first
// attempt hangs and whose hedge wins sent two attempts to the server, and
// the throttle counts both as requests: every attempt counts as a request,
// retries and hedges included, a loser canceled after the winner too.
func TestThrottleHedgeLoserCountsAsARequest(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := drawing(&throttle.Throttle{MinRate: -1}, admitAll)
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := hits.Add(1)
		switch {
		case req.URL.Path == "/fail":
			return response(req, 503, ""), nil
		case n == 2: // the hedged operation's first attempt hangs
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return response(req, 200, "winner"), nil
	})
	// A destination that has signalled overload, so that every attempt
	// is counted in the window.
	one := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: th}
	resp, err := one.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/fail", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req0, _ := throttleCounts(th, "api.test")

	var o Outcome
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Throttle: th, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/items", nil))
	advanceAt(t, fc, hitCount{&hits}, 2, 1, 10*time.Millisecond)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if o.Hedges != 1 || o.Winner != 2 || o.LosersCanceled != 1 {
		t.Fatalf("outcome %+v; want a hedge that won and a loser canceled", o)
	}
	req1, _ := throttleCounts(th, "api.test")
	if got := req1 - req0; got != 2 {
		t.Errorf("a hedged operation sent 2 attempts (Outcome: %d attempts, %d loser); the throttle counted %v requests; want 2 (docs/overload.md: every attempt counts as a request, hedges included)", o.Attempts, o.LosersCanceled, got)
	}
}

// TestThrottleOneDestinationForEverySpellingOfAHost: a fully qualified
// name with its trailing dot, an IPv6 address written out in full, and a
// port with a leading zero (the dialer reads "080" as 80) name the same
// host and port the dialer connects to; every spelling of a host is one
// destination, so a request spelled another way is refused as the failing
// host's other requests are.
func TestThrottleOneDestinationForEverySpellingOfAHost(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"http://api.test/", "http://api.test./"},
		{"https://api.test/", "https://api.test.:443/"},
		{"http://api.test/", "http://api.test:080/"},
		{"http://[2001:db8::1]:8080/", "http://[2001:db8:0:0:0:0:0:1]:8080/"},
	} {
		fc := clockwork.NewFakeClock()
		base := &countingBase{status: func(*http.Request) int { return 503 }}
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: drawing(&throttle.Throttle{}, func() float64 { return 0 })}
		call := func(url string) error { return get(t, tr, url) }
		for range 50 { // 50 failures at 1000 a second: refusing at the cap
			call(pair[0])
			fc.Advance(time.Millisecond)
		}
		if err := call(pair[0]); !errors.Is(err, throttle.ErrThrottled) {
			t.Fatalf("%s after 50 failures: %v; want ErrThrottled", pair[0], err)
		}
		before := base.hits.Load()
		err := call(pair[1])
		if !errors.Is(err, throttle.ErrThrottled) {
			t.Errorf("%s, refused as %s: %v, %d request(s) reached the failing host; want ErrThrottled (Throttle.Key: every spelling of a host is one destination)", pair[1], pair[0], err, base.hits.Load()-before)
		}
		a, b := newRequest(t, context.Background(), "GET", pair[0], nil), newRequest(t, context.Background(), "GET", pair[1], nil)
		tb := &Transport{BudgetPerHost: true}
		if tb.budgetFor(a) != tb.budgetFor(b) {
			t.Errorf("BudgetPerHost: %s and %s have two budgets; want one", pair[0], pair[1])
		}
	}
}

// TestThrottleARefusalBelowIsNotAnAccept: a one-attempt wrapper (for hooks
// or a deadline) over a retrying Transport, both with a Throttle, as Clone
// gives them. The server answers 503 to everything for 2s. An operation
// the inner Transport refused never reached the server, and the wrapper's
// Throttle counts it for neither requests nor accepts: with two Throttles
// the wrapper's window holds no accept, and with one shared the server
// sees about as many requests as through the retrying Transport alone.
func TestThrottleARefusalBelowIsNotAnAccept(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		down := func(*http.Request) int { return 503 }
		base, alone := &countingBase{status: down}, &countingBase{status: down}
		thInner, thOuter := drawing(&throttle.Throttle{}, evenDraws()), drawing(&throttle.Throttle{}, evenDraws())
		if shared {
			thOuter = thInner
		}
		inner := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Jitter: noJitter, Throttle: thInner}
		outer := &Transport{Base: inner, Clock: fc, MaxAttempts: 1, Throttle: thOuter}
		single := &Transport{Base: alone, Clock: fc, MaxAttempts: 3, Jitter: noJitter, Throttle: drawing(&throttle.Throttle{}, evenDraws())}
		for range 2000 {
			for _, tr := range []*Transport{outer, single} {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
				if err == nil {
					resp.Body.Close()
				}
			}
			fc.Advance(time.Millisecond)
		}
		req, acc := throttleCounts(thOuter, "api.test")
		if !shared && acc > 0 {
			t.Errorf("two Throttles: the wrapper's window holds %.0f accepts of %.0f requests while the server answered only 503; want 0 accepts (an operation refused below never reached the server)", acc, req)
		}
		if got, want := base.hits.Load(), alone.hits.Load(); shared && float64(got) > 1.25*float64(want) {
			t.Errorf("one shared Throttle: the server took %d requests of 2000 operations in the outage through the wrapper, %d through the retrying Transport alone; want about as many (the wrapper counts the inner refusals as accepts: its window holds %.0f accepts)", got, want, acc)
		}
	}
}

// TestThrottleTinyWindowDoesNotPanicARoundTrip: a Window shorter than
// its ten buckets, through a Transport: a 503 and a later operation with Window 5ns return, they do
// not panic.
func TestThrottleTinyWindowDoesNotPanicARoundTrip(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(*http.Request) int { return 503 }}
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Window: 5}}
	for i := range 3 {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("operation %d with Window 5ns: panic %v; want a response or an error", i+1, p)
				}
			}()
			resp, err := tr.RoundTrip(httptest.NewRequest("GET", "http://api.test/", nil))
			if err == nil {
				resp.Body.Close()
			}
		}()
		fc.Advance(time.Millisecond)
	}
}

// TestThrottleOneStateForOneHost: a host is one destination however its
// URL writes it: host names compare case-insensitively (DNS), and a
// scheme's default port is the same as none. Each spelling shares the
// throttle's state and the per-host budget, so a failing host cannot be
// reached around its throttle by changing the case.
func TestThrottleOneStateForOneHost(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"http://api.test/", "http://API.TEST/"},
		{"http://api.test/", "http://Api.Test/"},
		{"http://[2001:db8::1]:8080/", "http://[2001:DB8::1]:8080/"},
		{"http://api.test/", "http://api.test:80/"},
		{"https://api.test/", "https://api.test:443/"},
	} {
		a, b := httptest.NewRequest("GET", pair[0], nil), httptest.NewRequest("GET", pair[1], nil)
		th := &throttle.Throttle{}
		if th.Dest(a) != th.Dest(b) {
			t.Errorf("throttle: %s and %s are two destinations (keys %q, %q); want one", pair[0], pair[1], desttable.HostKey(a), desttable.HostKey(b))
		}
		tr := &Transport{BudgetPerHost: true}
		if tr.budgetFor(a) != tr.budgetFor(b) {
			t.Errorf("BudgetPerHost: %s and %s have two budgets; want one", pair[0], pair[1])
		}
	}
}
