package httpretry

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

// TestHedgeNeverStartsBeforeItsDelayUnderConcurrency: many goroutines,
// several Transports with tiny fixed delays and adaptive ones, one with a
// fake clock, over loopback HTTP/1.1 and HTTP/2 whose latency straddles
// the delays. For every operation: no hedge starts before its delay
// passed since RoundTrip was called; the server saw at most as many
// requests as Outcome counts attempts, and at least one; Outcome's hedges
// are its attempts but the first (the server never fails); the answer is
// the operation's own (a pooled hedging state fired by an earlier
// operation's alarm would mix them up); no goroutine is left.
func TestHedgeNeverStartsBeforeItsDelayUnderConcurrency(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	var hits sync.Map // op id -> *atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Op")
		v, _ := hits.LoadOrStore(id, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		d, _ := strconv.Atoi(r.Header.Get("X-Sleep-Us"))
		select {
		case <-time.After(time.Duration(rand.IntN(d+1)) * time.Microsecond):
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(id))
	})
	h1 := newLoopbackServer(t, false, handler)
	h2 := newLoopbackServer(t, true, handler)

	type setup struct {
		srv   *httptest.Server
		delay time.Duration // 0: adaptive
		fake  bool
	}
	var setups []setup
	for _, srv := range []*httptest.Server{h1, h2} {
		for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond, 0} {
			setups = append(setups, setup{srv: srv, delay: d})
		}
		setups = append(setups, setup{srv: srv, delay: time.Millisecond, fake: true})
	}
	fake := clockwork.NewFakeClock()
	stopFake := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopFake:
				return
			case <-time.After(200 * time.Microsecond):
				fake.Advance(500 * time.Microsecond)
			}
		}
	}()

	var opID atomic.Int64
	var failures atomic.Int32
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 20 {
			t.Errorf(format, args...)
		}
	}
	var wg sync.WaitGroup
	for _, s := range setups {
		var outcomes sync.Map // op id -> Outcome
		var hedgeAt sync.Map  // op id -> time of the first hedge's OnAttemptStart
		tr := &Transport{
			Base:    s.srv.Client().Transport,
			Budget:  Unlimited,
			Hedging: &Hedging{Delay: s.delay},
			OnAttemptStart: func(req *http.Request, n int) {
				if n == 2 {
					hedgeAt.LoadOrStore(req.Header.Get("X-Op"), time.Now())
				}
			},
			OnDone: func(req *http.Request, o Outcome) { outcomes.Store(req.Header.Get("X-Op"), o) },
		}
		if s.fake {
			tr.Clock = fake
		}
		sleepUs := 2 * s.delay.Microseconds()
		if sleepUs == 0 {
			sleepUs = 2000
		}
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 150; i++ {
					id := fmt.Sprint(opID.Add(1))
					req, _ := http.NewRequest("GET", s.srv.URL+"/", nil)
					req.Header.Set("X-Op", id)
					req.Header.Set("X-Sleep-Us", fmt.Sprint(sleepUs))
					began := time.Now()
					resp, err := tr.RoundTrip(req)
					if err != nil {
						fail("op %s: %v", id, err)
						continue
					}
					body := readBody(t, resp)
					if body != id {
						fail("op %s: body %q; want the operation's own answer", id, body)
					}
					ov, ok := outcomes.Load(id)
					if !ok {
						fail("op %s: OnDone not called before RoundTrip returned", id)
						continue
					}
					o := ov.(Outcome)
					var n int32
					if v, ok := hits.Load(id); ok {
						n = v.(*atomic.Int32).Load()
					}
					if n < 1 || int(n) > o.Attempts {
						fail("op %s: the server saw %d requests; outcome %+v", id, n, o)
					}
					if o.Hedges != o.Attempts-1 {
						fail("op %s: outcome %+v: every attempt but the first should be a hedge", id, o)
					}
					if at, ok := hedgeAt.Load(id); ok && s.delay > 0 && !s.fake {
						if gap := at.(time.Time).Sub(began); gap < s.delay {
							fail("op %s (%s, delay %v): hedge started %v after RoundTrip was called", id, s.srv.URL, s.delay, gap)
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stopFake)
	h1.CloseClientConnections()
	h2.CloseClientConnections()
	for _, s := range setups {
		s.srv.Client().Transport.(*http.Transport).CloseIdleConnections()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find(ignore, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines left: %v", err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAlarmHeapEmptiesOnceAHungOperationsHedgeRings: one operation whose
// server never answers (its caller's context never canceled) while
// thousands of others of a like delay complete: its hedge still fires
// (the server sees it), the heap holds no more entries than operations
// armed within one delay while it waits, and once its delay rang the
// heap drops to about the operations waiting for their first answer.
func TestAlarmHeapEmptiesOnceAHungOperationsHedgeRings(t *testing.T) {
	const delay = 300 * time.Millisecond
	release := make(chan struct{})
	var hungHits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hungHits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	hung := &Transport{Base: srv.Client().Transport, Budget: Unlimited, Hedging: &Hedging{Delay: delay}}
	hungDone := make(chan struct{})
	go func() {
		defer close(hungDone)
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		if resp, err := hung.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	pollUntil(t, "the hung operation's first attempt to reach the server", func() bool { return hungHits.Load() > 0 })
	fast := &Transport{Budget: Unlimited, Hedging: &Hedging{Delay: delay},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) { return response(req, 200, "ok"), nil })}
	ops := 0
	maxLen := 0
	start := time.Now()
	for hungHits.Load() < 2 {
		for j := 0; j < 50; j++ {
			req, _ := http.NewRequest("GET", "https://fast.test/", nil)
			resp, err := fast.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ops++
		}
		if n := hedgeAlarms.Len(); n > maxLen {
			maxLen = n
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the hung operation's hedge (delay %v) never reached the server in 30s; heap %d", delay, hedgeAlarms.Len())
		}
	}
	if maxLen > ops+10 {
		t.Errorf("heap held %d entries while %d operations ran", maxLen, ops)
	}
	// After its delay rang, the entries behind it go with the next arming.
	req, _ := http.NewRequest("GET", "https://fast.test/", nil)
	resp, _ := fast.RoundTrip(req)
	resp.Body.Close()
	time.Sleep(2 * delay) // every entry armed before is due and gone by then
	req, _ = http.NewRequest("GET", "https://fast.test/", nil)
	resp, _ = fast.RoundTrip(req)
	resp.Body.Close()
	if n := hedgeAlarms.Len(); n > 8 {
		t.Errorf("heap holds %d entries after the hung operation's delay rang and %d operations ended; want about the operations waiting", n, ops)
	}
	t.Logf("%d operations, heap at most %d", ops, maxLen)
}
