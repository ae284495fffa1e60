package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/httptestutil"
)

// TestPlannedWaitSurvivesRealTimers: a wait planned so that it and
// MinAttemptTime exactly fill the time left must not be thrown away
// because a real timer fires a little late. Timeout 1.5s, BaseDelay 1s,
// a jitter of window−1 and a 503 with Retry-After: 1: the jitter is
// shortened so that the retry starts with exactly MinAttemptTime left,
// and it must start.
func TestPlannedWaitSurvivesRealTimers(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("needs 1s of real time")
	}
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := &Transport{
		Base:      srv.Client().Transport,
		Timeout:   1500 * time.Millisecond,
		BaseDelay: time.Second,
		Jitter:    func(window time.Duration) time.Duration { return window - 1 },
	}
	var log attemptLog
	tr.OnAttempt = log.onAttempt
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil))
	// The retry must start: the planned wait is never thrown away, unless
	// the timer woke more than half MinAttemptTime after the planned start
	// (1.4s: exactly MinAttemptTime left), which docs/rules.md answers with
	// deadline_exhausted. Only a machine too busy to run a timer on time
	// does that, and then the operation ended that late.
	planned := tr.Timeout - DefaultMinAttemptTime
	if o.Attempts == 1 && o.Reason == DeadlineExhausted && o.Elapsed > planned+DefaultMinAttemptTime/2 {
		t.Logf("the timer woke %v after the planned start: %s, as docs/rules.md allows", o.Elapsed-planned, o.Reason)
		return
	}
	if o.Attempts != 2 || hits.Load() != 2 {
		t.Fatalf("attempts %d, hits %d (outcome %+v); want 2: the planned retry must start", o.Attempts, hits.Load(), o)
	}
	if err != nil {
		// The retry started with about MinAttemptTime left; only a
		// machine too busy to answer a loopback request in that time
		// makes it fail, and then it used its whole time.
		if a := log.attempts[1]; a.Duration < 50*time.Millisecond {
			t.Fatalf("err = %v after a second attempt of %v; want the retry's 200", err, a.Duration)
		}
		t.Logf("the busy machine did not answer within the last %v: %v", log.attempts[1].Duration, err)
		return
	}
	if got := readBody(t, resp); resp.StatusCode != 200 || got != "ok" {
		t.Errorf("got %d %q; want 200 ok", resp.StatusCode, got)
	}
}

// TestLateWakeup: after a planned wait, the retry starts if the wake-up
// came at most half of MinAttemptTime late; a wake-up later than that (the
// process was stopped) stops the operation with deadline_exhausted.
func TestLateWakeup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		late     time.Duration
		want     StopReason
		wantHits int
	}{
		{"on time", 0, Final, 2},
		{"40ms late", 40 * time.Millisecond, Final, 2},
		{"60ms late", 60 * time.Millisecond, DeadlineExhausted, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
			// 1s left, MinAttemptTime 100ms: a wait of 900ms exactly fits.
			tr := &Transport{Base: base, Clock: fc, Timeout: time.Second, BaseDelay: 900 * time.Millisecond,
				Jitter: func(w time.Duration) time.Duration { return w }}
			var o Outcome
			ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
			// Waiters: the Timeout's context and the wait's timer.
			advance(t, fc, 2, 900*time.Millisecond+tt.late)
			r := await(t, ch)
			if r.resp != nil {
				readBody(t, r.resp)
			}
			if o.Reason != tt.want || base.Hits() != tt.wantHits {
				t.Errorf("reason %s, hits %d; want %s, %d", o.Reason, base.Hits(), tt.want, tt.wantHits)
			}
		})
	}
}

// stalledBody is a request body whose Read blocks until it is closed, as
// a pipe whose writer never writes.
type stalledBody struct {
	closed chan struct{}
	once   atomic.Bool
}

func newStalledBody() *stalledBody { return &stalledBody{closed: make(chan struct{})} }

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, io.ErrClosedPipe
}

func (b *stalledBody) Close() error {
	if b.once.CompareAndSwap(false, true) {
		close(b.closed)
	}
	return nil
}

// TestBufferingEndsWithTheOperation: a body of known length is buffered
// before the first attempt, and a slow one must not block RoundTrip past
// the operation's deadline or the caller's cancellation.
func TestBufferingEndsWithTheOperation(t *testing.T) {
	realTime(t)
	t.Parallel()
	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base, Clock: fc, Timeout: time.Second}
		req := newRequest(t, context.Background(), "PUT", "http://api.test/upload", nil)
		body := newStalledBody()
		req.Body, req.ContentLength = body, 10
		ch := start(tr, req)
		advance(t, fc, 1, time.Second)
		r := await(t, ch)
		var e *Error
		if !errors.As(r.err, &e) || e.Reason != DeadlineExhausted || !e.Timeout() || e.Attempts != 0 {
			t.Fatalf("err = %v; want deadline_exhausted, a timeout, no attempt", r.err)
		}
		if base.Hits() != 0 {
			t.Errorf("hits %d; want 0", base.Hits())
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base}
		req := newRequest(t, ctx, "PUT", "http://api.test/upload", nil)
		req.Body, req.ContentLength = newStalledBody(), 10
		ch := start(tr, req)
		cancel()
		r := await(t, ch)
		var e *Error
		if !errors.As(r.err, &e) || e.Reason != Canceled || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("err = %v; want canceled", r.err)
		}
	})
	t.Run("real clock, caller deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base}
		req := newRequest(t, ctx, "PUT", "http://api.test/upload", nil)
		req.Body, req.ContentLength = newStalledBody(), 10
		_, err := tr.RoundTrip(req)
		var e *Error
		if !errors.As(err, &e) || e.Reason != Canceled || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v; want canceled with the caller's deadline", err)
		}
	})
}

func TestExactlyMinAttemptTimeLeftRetries(t *testing.T) {
	t.Parallel()
	// The 503 arrives at 200ms of a 300ms operation: exactly
	// MinAttemptTime (100ms) is left, which is enough for a retry with no
	// wait; a millisecond later it is not.
	for _, tc := range []struct {
		latency  time.Duration
		wantHits int
	}{{200 * ms, 2}, {201 * ms, 1}} {
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503, Delay: tc.latency}, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base, Clock: fc, Timeout: 300 * ms, Jitter: noJitter}
		ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		advance(t, fc, 2, tc.latency)
		r := await(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		readBody(t, r.resp)
		if base.Hits() != tc.wantHits {
			t.Errorf("503 after %v: hits = %d; want %d", tc.latency, base.Hits(), tc.wantHits)
		}
	}
}

func TestNoTimeLeftStopsEvenWithoutWait(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	ctx, cancel := clockwork.WithTimeout(context.Background(), fc, 50*ms)
	defer cancel()
	var o Outcome
	resp, err := (&Transport{Base: base, Clock: fc, Jitter: noJitter}).RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if base.Hits() != 1 || o.Reason != DeadlineExhausted {
		t.Errorf("hits %d, outcome %+v; want 1 attempt, deadline_exhausted", base.Hits(), o)
	}
}

func TestTimeoutOnlyWithEmptyBody(t *testing.T) {
	t.Parallel()
	var ctx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		ctx = r.Context()
		resp := response(r, 204, "")
		resp.Body = http.NoBody
		return resp, nil
	})
	resp, err := (&Transport{Base: base, Timeout: time.Minute}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != http.NoBody || !done(ctx) {
		t.Errorf("Body %T, context done %v; want NoBody kept and the operation's context released at once", resp.Body, done(ctx))
	}
}

// countingClock is a fake clock that counts readings and timers.
type countingClock struct {
	*clockwork.FakeClock
	nows, timers atomic.Int32
}

func (c *countingClock) Now() time.Time {
	c.nows.Add(1)
	return c.FakeClock.Now()
}

func (c *countingClock) Since(t time.Time) time.Duration {
	c.nows.Add(1)
	return c.FakeClock.Since(t)
}

func (c *countingClock) NewTimer(d time.Duration) clockwork.Timer {
	c.timers.Add(1)
	return c.FakeClock.NewTimer(d)
}

// TestClockReadOnlyWhenNeeded: the success path of a Transport with no
// deadline, no per-attempt limit, no hooks and no Outcome reads no clock;
// each of those makes it read one; a retry with no wait sets no timer.
func TestClockReadOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	hook := func(*http.Request, Attempt) {}
	done := func(*http.Request, Outcome) {}
	tests := []struct {
		name  string
		tr    func() *Transport
		ctx   func() (context.Context, context.CancelFunc)
		reads bool
	}{
		{"nothing needs time", func() *Transport { return &Transport{} }, nil, false},
		{"a Logger needs none", func() *Transport { return &Transport{Logger: slog.New(slog.DiscardHandler)} }, nil, false},
		{"Timeout", func() *Transport { return &Transport{Timeout: time.Second} }, nil, true},
		{"AttemptTimeout", func() *Transport { return &Transport{AttemptTimeout: time.Second} }, nil, true},
		{"Propagate", func() *Transport { return &Transport{Propagate: true} }, nil, true},
		{"OnAttempt", func() *Transport { return &Transport{OnAttempt: hook} }, nil, true},
		{"OnDone", func() *Transport { return &Transport{OnDone: done} }, nil, true},
		{"a caller deadline", func() *Transport { return &Transport{} }, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &countingClock{FakeClock: clockwork.NewFakeClock()}
			tr := tt.tr()
			tr.Base = httptestutil.NewTransport(clock.FakeClock, httptestutil.Step{Status: 200})
			tr.Clock = clock
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := clock.nows.Load() > 0; got != tt.reads {
				t.Errorf("%d clock readings; want readings: %v", clock.nows.Load(), tt.reads)
			}
		})
	}
	t.Run("a retry without a wait sets no timer", func(t *testing.T) {
		t.Parallel()
		clock := &countingClock{FakeClock: clockwork.NewFakeClock()}
		base := httptestutil.NewTransport(clock.FakeClock, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base, Clock: clock, Jitter: noJitter}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if n := clock.timers.Load(); n != 0 || base.Hits() != 2 {
			t.Errorf("%d timers, %d hits; want 0 timers, 2 hits", n, base.Hits())
		}
	})
}

// TestRequestCancelChannelEndsWait: closing the deprecated Request.Cancel
// channel during a Retry-After wait ends the operation at once as
// canceled; no second attempt is made after the wait.
func TestRequestCancelChannelEndsWait(t *testing.T) {
	realTime(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			cancel := make(chan struct{})
			var closer sync.WaitGroup
			var o Outcome
			tr := &Transport{
				Base: serverBase(t, srv),
				OnAttempt: func(_ *http.Request, a Attempt) {
					if a.Wait > 0 {
						// Closed from elsewhere while RoundTrip waits.
						closer.Go(func() {
							time.Sleep(100 * time.Millisecond)
							close(cancel)
						})
					}
				},
			}
			req := newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil)
			//lint:ignore SA1019 the deprecated channel is what is tested
			req.Cancel = cancel
			resp, err := tr.RoundTrip(req)
			closer.Wait()
			if resp != nil {
				resp.Body.Close()
			}
			if got := hits.Load(); got != 1 {
				t.Errorf("server saw %d requests; want 1: the wait must end with the Cancel channel", got)
			}
			if o.Reason != Canceled || !errors.Is(err, context.Canceled) {
				t.Errorf("reason %q, err %v; want canceled, matching context.Canceled", o.Reason, err)
			}
			if o.Waited >= 2*time.Second {
				t.Errorf("waited %v; want the wait cut short of its 2s", o.Waited)
			}
		})
	}
}
