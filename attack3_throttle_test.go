package httpretry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds a third round of attempts to break the Throttle (issue
// 23): a healthy destination refused, a signal not counted, a field that
// turns it off, a spelling of a host that walks around it.

// TestAttack3ThrottleBurstAfterAQuietSpellIsNotRefused: a destination
// called once, then not for ten minutes, then 60 times in 600ms, all
// accepted, then answering one 503. The window (600ms) holds 60 accepts
// and 1 failure: the SRE form gives p = max(0, (61 − 2·60)/62) = 0, and a
// healthy phase refuses nothing. The accepts, never folded, are spread
// over the ten minutes since the first one, so the window credits about
// 0.06 of them, and the next operation is refused with p ≈ 0.49.
func TestAttack3ThrottleBurstAfterAQuietSpellIsNotRefused(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var status atomic.Int64
	status.Store(200)
	base := &countingBase{status: func(*http.Request) int { return int(status.Load()) }}
	// A draw of 0.1: refused only when p > 0.1.
	th := &throttle.Throttle{Rand: func() float64 { return 0.1 }}
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
		req, acc := th.Counts("api.test")
		t.Errorf("after 60 accepts and 1 failure in the last 600ms: %v; want admitted: the README says the throttle refuses with p = (requests − K·accepts)/(requests + 1) over its window (here 0) and that a healthy phase refuses nothing, but the window (this refusal included) credits %.3f accepts against %.3f requests (the burst's accepts spread over the 10 minutes since the first)", err, acc, req)
	}
}

// TestAttack3ThrottleInfiniteMinRateTakesTheDefault: docs/overload.md
// says "A field that is 0, negative, NaN or infinite takes its default (a
// negative MinRate excepted)". MinRate +Inf must then be 1 a second, and
// a destination failing every one of 200 operations at 1000 a second is
// refused; it is never refused: +Inf requests are needed before any
// refusal.
func TestAttack3ThrottleInfiniteMinRateTakesTheDefault(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{math.Inf(1), 0} {
		fc := clockwork.NewFakeClock()
		base := &countingBase{status: func(*http.Request) int { return 503 }}
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{MinRate: rate, Rand: evenDraws()}}
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

// TestAttack3ThrottleHedgeLoserCountsAsARequest: docs/overload.md says
// "Every attempt counts as a request, retries and hedges included". A
// hedged operation whose first attempt hangs and whose hedge wins sent two
// attempts to the server; the throttle counts one: the loser, canceled
// after the winner, is never counted, so the server can see more than K
// requests per accepted one while the throttle computes less.
func TestAttack3ThrottleHedgeLoserCountsAsARequest(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &throttle.Throttle{MinRate: -1, Rand: admitAll}
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
	req0, _ := th.Counts("api.test")

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
	req1, _ := th.Counts("api.test")
	if got := req1 - req0; got != 2 {
		t.Errorf("a hedged operation sent 2 attempts (Outcome: %d attempts, %d loser); the throttle counted %v requests; want 2 (docs/overload.md: every attempt counts as a request, hedges included)", o.Attempts, o.LosersCanceled, got)
	}
}

// TestAttack3ThrottleOneDestinationForEverySpellingOfAHost: the Key
// field's documentation promises "every spelling of a host is one
// destination", and docs/overload.md that a failing host cannot be
// reached around its throttle by spelling it another way. A fully
// qualified name with its trailing dot, an IPv6 address written out
// in full, and a port with a leading zero (the dialer reads "080" as 80)
// name the same host and port the dialer connects to; each is a fresh
// destination, and a request spelled so reaches the failing host while
// every other spelling of it is refused.
func TestAttack3ThrottleOneDestinationForEverySpellingOfAHost(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"http://api.test/", "http://api.test./"},
		{"https://api.test/", "https://api.test.:443/"},
		{"http://api.test/", "http://api.test:080/"},
		{"http://[2001:db8::1]:8080/", "http://[2001:db8:0:0:0:0:0:1]:8080/"},
	} {
		fc := clockwork.NewFakeClock()
		base := &countingBase{status: func(*http.Request) int { return 503 }}
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: func() float64 { return 0 }}}
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

// TestAttack3ThrottleARefusalBelowIsNotAnAccept: a one-attempt wrapper
// (for hooks or a deadline, docs/rules.md) over a retrying Transport,
// both with a Throttle, as Clone gives them. The server answers 503 to
// everything for 2s. An operation the inner Transport refused never
// reached the server, yet the wrapper's Throttle counts the inner
// refusal's error as accepted ("accepted" means the server did not
// signal overload; here the server was never asked). With two Throttles
// the wrapper's believes the server accepts nearly everything; with one
// shared, the false accepts lower the refusals and the server sees far
// more than one throttled layer lets through.
func TestAttack3ThrottleARefusalBelowIsNotAnAccept(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		fc := clockwork.NewFakeClock()
		down := func(*http.Request) int { return 503 }
		base, alone := &countingBase{status: down}, &countingBase{status: down}
		thInner, thOuter := &throttle.Throttle{Rand: evenDraws()}, &throttle.Throttle{Rand: evenDraws()}
		if shared {
			thOuter = thInner
		}
		inner := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Jitter: noJitter, Throttle: thInner}
		outer := &Transport{Base: inner, Clock: fc, MaxAttempts: 1, Throttle: thOuter}
		single := &Transport{Base: alone, Clock: fc, MaxAttempts: 3, Jitter: noJitter, Throttle: &throttle.Throttle{Rand: evenDraws()}}
		for range 2000 {
			for _, tr := range []*Transport{outer, single} {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
				if err == nil {
					resp.Body.Close()
				}
			}
			fc.Advance(time.Millisecond)
		}
		req, acc := thOuter.Counts("api.test")
		if !shared && acc > 0 {
			t.Errorf("two Throttles: the wrapper's window holds %.0f accepts of %.0f requests while the server answered only 503; want 0 accepts (an operation refused below never reached the server)", acc, req)
		}
		if got, want := base.hits.Load(), alone.hits.Load(); shared && float64(got) > 1.25*float64(want) {
			t.Errorf("one shared Throttle: the server took %d requests of 2000 operations in the outage through the wrapper, %d through the retrying Transport alone; want about as many (the wrapper counts the inner refusals as accepts: its window holds %.0f accepts)", got, want, acc)
		}
	}
}
