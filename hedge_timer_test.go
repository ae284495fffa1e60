package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// goroutineID is the id of the calling goroutine, from the header of its
// stack trace ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// hedgeGoroutines counts the goroutines whose stack holds a frame of a
// hedged operation's own goroutines: an attempt sent apart, or the loop
// run by the timer that fired the hedge.
func hedgeGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("httpretry.(*attempt).run(")) || bytes.Contains(g, []byte("httpretry.(*hedged).fired(")) {
			n++
		}
	}
	return n
}

// TestHedgeNotFiredSendsTheFirstAttemptOnTheCallersGoroutine: with
// Hedging on and an answer before the hedge delay, Base is called on the
// goroutine that called RoundTrip, and while it runs no goroutine of the
// operation exists: the first attempt costs no goroutine, only a timer
// that never fires.
func TestHedgeNotFiredSendsTheFirstAttemptOnTheCallersGoroutine(t *testing.T) {
	caller := goroutineID()
	var calls int
	tr := &Transport{Hedging: &Hedging{Delay: time.Hour}, Budget: Unlimited}
	before := hedgeGoroutines()
	tr.Base = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		calls++
		if id := goroutineID(); id != caller {
			t.Errorf("Base called on goroutine %s; want the caller's, %s", id, caller)
		}
		// Counted against what ran before: an earlier test's goroutine
		// may still be ending, and none can start meanwhile (parallel
		// tests wait until the sequential ones are done).
		if n := hedgeGoroutines(); n > before {
			t.Errorf("%d goroutines of hedged operations while its first attempt runs, %d before it; want no more", n, before)
		}
		return response(req, 200, "ok"), nil
	})
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "ok" {
		t.Errorf("body = %q; want ok", got)
	}
	if calls != 1 || o.Attempts != 1 || o.Hedges != 0 || o.Winner != 1 {
		t.Errorf("Base called %d times, outcome %+v; want 1 call, 1 attempt, no hedge, attempt 1 winning", calls, o)
	}
}

// TestHedgeFiredByTheTimerWhileTheCallerWaitsInBase: the hedge delay
// passes while the first attempt waits in Base on the caller's goroutine;
// the timer sends the hedge, which answers first and wins; the first
// attempt is canceled (its context ends, so that Base returns), and
// RoundTrip returns the hedge's body, readable to its end.
func TestHedgeFiredByTheTimerWhileTheCallerWaitsInBase(t *testing.T) {
	fc := clockwork.NewFakeClock()
	caller := make(chan string, 1)
	firstErr := make(chan error, 1)
	var hits atomic.Int32
	tr := &Transport{Clock: fc, Budget: Unlimited, Hedging: &Hedging{Delay: 10 * ms}}
	tr.Base = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			caller <- goroutineID()
			<-req.Context().Done()
			firstErr <- req.Context().Err()
			return nil, req.Context().Err()
		}
		return response(req, 200, "hedge"), nil
	})
	var o Outcome
	done := make(chan result, 1)
	var rtGoroutine string
	go func() {
		rtGoroutine = goroutineID()
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.test/", nil))
		done <- result{resp, err}
	}()
	first := <-caller
	advance(t, fc, 1, 10*ms)
	r := await(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := readBody(t, r.resp); got != "hedge" {
		t.Errorf("body = %q; want hedge", got)
	}
	if first != rtGoroutine {
		t.Errorf("first attempt sent on goroutine %s; want RoundTrip's, %s", first, rtGoroutine)
	}
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("first attempt's context ended with %v; want canceled", err)
	}
	if o.Attempts != 2 || o.Hedges != 1 || o.Winner != 2 || !o.HedgeWon || o.LosersCanceled != 1 {
		t.Errorf("outcome = %+v; want 2 attempts, 1 hedge winning, 1 loser canceled", o)
	}
}

// hookCalls records, for one operation, each hook's calls and how many of
// its hooks were running at once. Its fields are written without a lock:
// under -race, two hooks of one operation running concurrently, or a hook
// running on after RoundTrip returned, are reported as a data race.
type hookCalls struct {
	inFlight     atomic.Int32
	overlapped   bool
	starts       []int // OnAttemptStart's numbers
	attempts     []int // OnAttempt's numbers
	transients   int
	waits, dones int
}

// enter and leave bracket each hook's body.
func (c *hookCalls) enter() {
	if c.inFlight.Add(1) > 1 {
		c.overlapped = true
	}
	runtime.Gosched() // widen the window another hook would run in
}

func (c *hookCalls) leave() { c.inFlight.Add(-1) }

// TestHedgeHooksOfOneOperationNeverOverlap: hedged operations over
// HTTP/1.1 and HTTP/2, whose first request is slow so that hedges fire
// from their timers (or not, on a loaded machine: both are allowed), call
// no two hooks of one operation at once, and each hook as often as the
// docs say: OnAttemptStart and OnAttempt once per attempt, numbered 1 to
// Attempts, OnDone once, Transient at most once per attempt.
func TestHedgeHooksOfOneOperationNeverOverlap(t *testing.T) {
	realTime(t)
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]bool{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				op := r.URL.Query().Get("op")
				mu.Lock()
				first := !seen[op]
				seen[op] = true
				mu.Unlock()
				if first {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(40 * time.Millisecond):
					}
				}
				io.WriteString(w, "ok")
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			calls := make([]*hookCalls, 20)
			for i := range calls {
				calls[i] = &hookCalls{}
			}
			of := func(req *http.Request) *hookCalls {
				var i int
				fmt.Sscan(req.URL.Query().Get("op"), &i)
				return calls[i]
			}
			tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 3, Budget: Unlimited,
				Hedging: &Hedging{Delay: 5 * time.Millisecond, MaxExtraLoad: 0.9},
				OnAttemptStart: func(req *http.Request, n int) {
					c := of(req)
					c.enter()
					defer c.leave()
					c.starts = append(c.starts, n)
				},
				OnAttempt: func(req *http.Request, a Attempt) {
					c := of(req)
					c.enter()
					defer c.leave()
					c.attempts = append(c.attempts, a.Number)
				},
				OnWait: func(req *http.Request, _ Wait) {
					c := of(req)
					c.enter()
					defer c.leave()
					c.waits++
				},
				OnDone: func(req *http.Request, _ Outcome) {
					c := of(req)
					c.enter()
					defer c.leave()
					c.dones++
				},
			}
			outcomes := make([]Outcome, len(calls))
			var wg sync.WaitGroup
			for i := range calls {
				// Transient sees no request: each operation gets a
				// Transport of its own sharing the Base.
				tri := tr.Clone()
				tri.Transient = func(resp *http.Response, err error) bool {
					c := calls[i]
					c.enter()
					defer c.leave()
					c.transients++
					return IsTransient(resp, err)
				}
				wg.Go(func() {
					req := newRequest(t, WithOutcome(context.Background(), &outcomes[i]), "GET", fmt.Sprintf("%s/?op=%d", srv.URL, i), nil)
					resp, err := tri.RoundTrip(req)
					if err != nil {
						t.Errorf("op %d: %v", i, err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				})
			}
			wg.Wait()
			hedged := 0
			for i, c := range calls {
				o := outcomes[i]
				hedged += o.Hedges
				if c.overlapped {
					t.Errorf("op %d: two hooks ran at once", i)
				}
				if !numbered(c.starts, o.Attempts) || !numbered(c.attempts, o.Attempts) {
					t.Errorf("op %d: OnAttemptStart %v, OnAttempt %v; want each of 1..%d once", i, c.starts, c.attempts, o.Attempts)
				}
				if c.dones != 1 || c.transients > o.Attempts || c.waits != 0 {
					t.Errorf("op %d: OnDone %d, Transient %d, OnWait %d times for %d attempts; want 1, at most %d, 0", i, c.dones, c.transients, c.waits, o.Attempts, o.Attempts)
				}
			}
			t.Logf("%d hedges over %d operations", hedged, len(calls))
			srv.Client().Transport.(*http.Transport).CloseIdleConnections()
		})
	}
}

// numbered reports whether ns holds each of 1..n exactly once.
func numbered(ns []int, n int) bool {
	if len(ns) != n {
		return false
	}
	seen := make([]bool, n+1)
	for _, x := range ns {
		if x < 1 || x > n || seen[x] {
			return false
		}
		seen[x] = true
	}
	return true
}

// TestHedgeFiredHookPanicReachesTheCaller: an OnAttempt that panics on
// the goroutine of the timer that fired the hedge has its panic raised on
// RoundTrip's goroutine, once every attempt has ended.
func TestHedgeFiredHookPanicReachesTheCaller(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Body: "slow", Delay: time.Second},
		httptestutil.Step{Body: "fast"},
	)
	tr := &Transport{Base: base, Clock: fc, Budget: Unlimited, Hedging: &Hedging{Delay: 10 * ms},
		OnAttempt: func(_ *http.Request, a Attempt) {
			if a.Number == 2 {
				panic("hook")
			}
		}}
	got := make(chan any, 1)
	before := hedgeGoroutines()
	go func() {
		defer func() { got <- recover() }()
		tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.test/", nil))
	}()
	advanceAt(t, fc, base, 1, 2, 10*ms)
	select {
	case p := <-got:
		if p != "hook" {
			t.Errorf("recovered %v; want the hook's panic", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip did not return")
	}
	// An earlier test's goroutine may still be ending: counted against
	// what ran before, and given time to end, as goleak gives it.
	n := hedgeGoroutines()
	for end := time.Now().Add(10 * time.Second); n > before && time.Now().Before(end); n = hedgeGoroutines() {
		time.Sleep(10 * time.Millisecond)
	}
	if n > before {
		t.Errorf("%d goroutines of hedged operations left, %d before it; want no more", n, before)
	}
}
