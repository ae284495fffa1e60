package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// releaseTurnRig is a destination on a fake clock that a 429 with
// Retry-After: 1 (and no rate-limit fields) has paused: Base answers its
// first request so, and calls answer for every later one.
type releaseTurnRig struct {
	fc    *clockwork.FakeClock
	tr    *Transport
	calls atomic.Int32
}

// newReleaseTurnRig makes the rig and sends the request whose 429 pauses
// the destination; setup completes the Transport first.
func newReleaseTurnRig(t *testing.T, answer func(r *http.Request) (*http.Response, error), setup func(*Transport)) *releaseTurnRig {
	t.Helper()
	rig := &releaseTurnRig{fc: clockwork.NewFakeClock()}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if rig.calls.Add(1) == 1 {
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: r}, nil
		}
		return answer(r)
	})
	rig.tr = &Transport{Base: base, Clock: rig.fc, MaxAttempts: 1, MaxRetryAfter: time.Minute,
		Throttle: drawing(&throttle.Throttle{WaitQuota: true, MinRate: -1}, func() float64 { return 1 })}
	if setup != nil {
		setup(rig.tr)
	}
	r := <-start(rig.tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	if r.err != nil || r.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first operation: %v; want its 429", r.err)
	}
	r.resp.Body.Close()
	return rig
}

// startRecovering runs rt.RoundTrip(req) in a goroutine as start does,
// and reports a panic it raised on the second channel.
func startRecovering(rt http.RoundTripper, req *http.Request) (<-chan result, <-chan any) {
	ch, panicked := make(chan result, 1), make(chan any, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				panicked <- p
			}
		}()
		resp, err := rt.RoundTrip(req)
		ch <- result{resp, err}
	}()
	return ch, panicked
}

// boomHeader marks the request whose attempt a test's hook or Base
// panics on.
const boomHeader = "X-Boom"

// TestReleaseTurnOfAnAttemptEndedByAPanicIsGivenBack: a 429 with
// Retry-After: 1 pauses the destination, and one operation with
// WaitQuota is held for it. When the pause ends it takes the release's
// turn and is sent, and a panic ends its attempt on the caller's
// goroutine (its Transient hook, or Base itself) before the Throttle is
// told how the attempt went. RoundTrip raises the panic, and the turn
// passes on as for an attempt that ended without an answer: an operation
// held for the next turn is sent and answered, not left waiting for an
// answer that will never be recorded. Base is called three times. The
// same holds for a hedged operation, whose attempts its hedged loop ends.
func TestReleaseTurnOfAnAttemptEndedByAPanicIsGivenBack(t *testing.T) {
	t.Parallel()
	ok := func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}
	for _, tc := range []struct {
		name   string
		answer func(r *http.Request) (*http.Response, error)
		setup  func(*Transport)
	}{
		{name: "Transient", answer: ok, setup: func(tr *Transport) {
			tr.Transient = func(resp *http.Response, err error) bool {
				if resp != nil && resp.Request.Header.Get(boomHeader) != "" {
					panic("hook broke")
				}
				return IsTransient(resp, err)
			}
		}},
		{name: "Base", answer: func(r *http.Request) (*http.Response, error) {
			if r.Header.Get(boomHeader) != "" {
				panic("base broke")
			}
			return ok(r)
		}},
	} {
		for _, hedged := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: "/hedged"}[hedged], func(t *testing.T) {
				t.Parallel()
				setup := tc.setup
				if hedged {
					// No hedge is sent: the fake clock never reaches its
					// delay. The Budget refuses the pausing 429's retry.
					setup = func(tr *Transport) {
						tr.MaxAttempts, tr.Hedging, tr.Budget = 2, &Hedging{Delay: time.Hour}, &refusingBudget{}
						if tc.setup != nil {
							tc.setup(tr)
						}
					}
				}
				releasePanicTurn(t, newReleaseTurnRig(t, tc.answer, setup))
			})
		}
	}
}

// releasePanicTurn sends the operation whose attempt panics, held for the
// release of rig's pause, then the next one, and checks that the next one
// was answered and Base called three times.
func releasePanicTurn(t *testing.T, rig *releaseTurnRig) {
	t.Helper()
	boom := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
	boom.Header.Set(boomHeader, "1")
	_, panicked := startRecovering(rig.tr, boom)
	advance(t, rig.fc, 1, time.Second) // the pause ends: the held operation takes the turn
	select {
	case <-panicked:
	case <-time.After(hangGuardBody):
		t.Fatal("RoundTrip of the panicking attempt did not panic")
	}
	r := await(t, start(rig.tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)))
	if r.err != nil || r.resp.StatusCode != http.StatusOK {
		t.Fatalf("operation after the panicked turn: %v; want its 200", r.err)
	}
	r.resp.Body.Close()
	if n := rig.calls.Load(); n != 3 {
		t.Errorf("Base called %d times; want 3", n)
	}
}

// TestReleaseTurnPassesOnWhateverEndsTheAttempt: a 429 with Retry-After:
// 1 pauses the destination, and one operation with WaitQuota is held for
// it. When the pause ends it takes the release's turn and is sent, and
// its attempt ends without a 200: its caller cancels it, AttemptTimeout
// cuts it, or it is answered 503 and the Budget refuses the retry. Each
// time the next operation held is sent and answered 200: the turn passes
// on, and Base is called once per operation sent.
func TestReleaseTurnPassesOnWhateverEndsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"caller cancels the attempt", "AttemptTimeout", "Budget refuses the retry"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			answer := func(r *http.Request) (*http.Response, error) {
				select {
				case <-r.Context().Done(): // as net/http refuses a request whose context has ended
					return nil, context.Canceled
				default:
				}
				st := http.StatusOK
				switch {
				case r.Header.Get(boomHeader) == "":
				case name == "Budget refuses the retry":
					st = http.StatusServiceUnavailable
				default:
					<-r.Context().Done()
					return nil, r.Context().Err()
				}
				return &http.Response{StatusCode: st, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			}
			rig := newReleaseTurnRig(t, answer, func(tr *Transport) {
				switch name {
				case "AttemptTimeout":
					tr.AttemptTimeout = 100 * time.Millisecond
				case "Budget refuses the retry":
					tr.MaxAttempts, tr.Budget = 3, &refusingBudget{}
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			holder := newRequest(t, ctx, http.MethodGet, "http://api.test/", nil)
			holder.Header.Set(boomHeader, "1")
			first := start(rig.tr, holder)
			advance(t, rig.fc, 1, time.Second) // the pause ends: the held operation takes the turn
			pollUntil(t, "the held operation to be sent when the pause ended", func() bool { return rig.calls.Load() >= 2 })
			switch name {
			case "caller cancels the attempt":
				cancel()
			case "AttemptTimeout":
				advance(t, rig.fc, 1, 100*time.Millisecond)
			}
			if r := await(t, first); r.err == nil {
				r.resp.Body.Close()
			}
			r := await(t, start(rig.tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)))
			if r.err != nil || r.resp.StatusCode != http.StatusOK {
				t.Fatalf("the next operation held: %v; want its 200", r.err)
			}
			r.resp.Body.Close()
			if n := rig.calls.Load(); n != 3 {
				t.Errorf("Base called %d times; want 3: the pausing 429, the turn-holder, the next", n)
			}
		})
	}
}

// TestReleaseTurnOfAHedgedPanicPassesOnOnce: a 429 with Retry-After: 1
// pauses the destination; a hedged operation held for it takes the
// release's turn when the pause ends, is sent, and, while two more
// operations wait for the next turn, its Transient hook panics. The turn
// passes on once, not twice: one of the two is sent and, while its
// answer is awaited, the other is not; it is sent once the first is
// answered. Base is called four times: the pausing 429, the panicking
// attempt, the two held.
func TestReleaseTurnOfAHedgedPanicPassesOnOnce(t *testing.T) {
	t.Parallel()
	hold, boomNow := make(chan struct{}), make(chan struct{})
	answer := func(r *http.Request) (*http.Response, error) {
		if r.Header.Get(boomHeader) == "" {
			<-hold
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}
	rig := newReleaseTurnRig(t, answer, func(tr *Transport) {
		tr.MaxAttempts, tr.Hedging, tr.Budget = 2, &Hedging{Delay: time.Hour}, &refusingBudget{}
		tr.Transient = func(resp *http.Response, err error) bool {
			if resp != nil && resp.Request.Header.Get(boomHeader) != "" {
				<-boomNow
				panic("hook broke")
			}
			return IsTransient(resp, err)
		}
	})
	boom := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
	boom.Header.Set(boomHeader, "1")
	_, panicked := startRecovering(rig.tr, boom)
	advance(t, rig.fc, 1, time.Second) // the pause ends: the held operation takes the turn
	waitCalls(t, &rig.calls, 2)
	first := start(rig.tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	second := start(rig.tr, newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	time.Sleep(20 * time.Millisecond) // both wait for the turn (a slow machine can only make a wrong verdict pass)
	close(boomNow)
	select {
	case <-panicked:
	case <-time.After(hangGuardBody):
		t.Fatal("RoundTrip of the panicking attempt did not panic")
	}
	waitCalls(t, &rig.calls, 3)
	time.Sleep(50 * time.Millisecond) // a second turn passed on would send the other now
	if n := rig.calls.Load(); n != 3 {
		t.Fatalf("Base called %d times while the first held operation was answered; want 3: the turn passed on twice", n)
	}
	close(hold)
	for _, ch := range []<-chan result{first, second} {
		r := await(t, ch)
		if r.err != nil || r.resp.StatusCode != http.StatusOK {
			t.Fatalf("held operation: %v; want its 200", r.err)
		}
		r.resp.Body.Close()
	}
	if n := rig.calls.Load(); n != 4 {
		t.Errorf("Base called %d times; want 4", n)
	}
}

// waitCalls waits until calls reaches n, failing the test when it does
// not within hangGuardBody.
func waitCalls(t *testing.T, calls *atomic.Int32, n int32) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("Base to be called %d times", n), func() bool { return calls.Load() >= n })
}

// TestRetryWaitingForAReleaseTurnEndsCanceledWhenItsCallerCancels: a 429
// with Retry-After: 1 pauses the destination. When the pause ends an
// operation with WaitQuota and 2 attempts takes the release's turn and
// is answered with a bare 429; while its retry waits out its backoff,
// another operation takes the turn its 429 gave back, and hangs. The
// retry then waits for the next turn, and its caller cancels it: the
// operation ends canceled, its error matches context.Canceled, as any
// other wait its caller ends, not as a refusal of the Throttle.
func TestRetryWaitingForAReleaseTurnEndsCanceledWhenItsCallerCancels(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	answer := func(r *http.Request) (*http.Response, error) {
		st := http.StatusTooManyRequests
		if r.Header.Get(boomHeader) != "" {
			<-hold
			st = http.StatusOK
		}
		return &http.Response{StatusCode: st, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}
	rig := newReleaseTurnRig(t, answer, nil)
	rig.tr.MaxAttempts, rig.tr.Jitter = 2, waits(time.Second) // the pausing 429 was not retried
	var o Outcome
	ctx, cancel := context.WithCancel(WithOutcome(context.Background(), &o))
	defer cancel()
	retrier := start(rig.tr, newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
	advance(t, rig.fc, 1, time.Second) // the pause ends: the operation takes the turn, meets a 429
	waitCalls(t, &rig.calls, 2)
	holder := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
	holder.Header.Set(boomHeader, "1")
	held := start(rig.tr, holder)
	waitCalls(t, &rig.calls, 3)
	advance(t, rig.fc, 1, time.Second) // the backoff ends: the retry waits for the turn
	time.Sleep(20 * time.Millisecond)  // the retry waits for the turn (a slow machine can only make a wrong verdict pass)
	cancel()
	r := await(t, retrier)
	if r.err == nil {
		r.resp.Body.Close()
		t.Fatal("the canceled retry returned a response")
	}
	if !errors.Is(r.err, context.Canceled) || o.Reason != Canceled {
		t.Errorf("error %v, reason %q; want context.Canceled, canceled", r.err, o.Reason)
	}
	close(hold)
	if r := await(t, held); r.err != nil {
		t.Errorf("held operation: %v", r.err)
	} else {
		r.resp.Body.Close()
	}
	if n := rig.calls.Load(); n != 3 {
		t.Errorf("Base called %d times; want 3: the pausing 429, the retrier's 429, the holder", n)
	}
}
