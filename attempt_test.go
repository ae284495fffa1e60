package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

const ms = time.Millisecond

// TestBookDetailTimeline is a worked execution of one read: a 1,000 ms deadline,
// a 250 ms attempt limit, three attempts, waits of 40 ms and 140 ms; the
// first two attempts time out and the third answers after 210 ms. The
// operation ends at exactly 890 ms.
func TestBookDetailTimeline(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Action: httptestutil.Hang},
		httptestutil.Step{Action: httptestutil.Hang},
		httptestutil.Step{Status: 200, Body: `{"id":"b1"}`, Delay: 210 * ms},
	)
	var log attemptLog
	tr := &Transport{
		Base: base, Clock: fc, MaxAttempts: 3,
		Timeout: 1000 * ms, AttemptTimeout: 250 * ms,
		Jitter:    waits(40*ms, 140*ms),
		OnAttempt: log.onAttempt, OnDone: log.onDone,
	}
	var o Outcome
	req := newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.bookstore.example/books/b1", nil)
	ch := start(tr, req)
	advanceAt(t, fc, base, 1, 2, 250*ms) // operation deadline + attempt 1 deadline
	advance(t, fc, 2, 40*ms)             // operation deadline + wait timer
	advanceAt(t, fc, base, 2, 2, 250*ms) // attempt 2
	advance(t, fc, 2, 140*ms)            // wait
	advanceAt(t, fc, base, 3, 3, 210*ms) // attempt 3 and its 210 ms response
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != `{"id":"b1"}` {
		t.Errorf("body = %q", got)
	}
	want := Outcome{Attempts: 3, Reason: Final, Status: 200, Waited: 180 * ms, Elapsed: 890 * ms}
	if o != want {
		t.Errorf("outcome = %+v; want %+v", o, want)
	}
	if got := base.Hits(); got != 3 {
		t.Errorf("hits = %d; want 3", got)
	}
	wantAttempts := []struct {
		status   int
		timedOut bool
		duration time.Duration
		wait     time.Duration
	}{
		{0, true, 250 * ms, 40 * ms},
		{0, true, 250 * ms, 140 * ms},
		{200, false, 210 * ms, 0},
	}
	if len(log.attempts) != len(wantAttempts) {
		t.Fatalf("OnAttempt called %d times; want 3", len(log.attempts))
	}
	for i, w := range wantAttempts {
		a := log.attempts[i]
		if a.Number != i+1 || a.Status != w.status || errors.Is(a.Err, ErrAttemptTimeout) != w.timedOut ||
			a.Duration != w.duration || a.Wait != w.wait {
			t.Errorf("attempt %d = %+v; want number %d, status %d, timed out %v, duration %v, wait %v",
				i+1, a, i+1, w.status, w.timedOut, w.duration, w.wait)
		}
	}
	if len(log.done) != 1 || log.done[0] != want {
		t.Errorf("OnDone = %+v; want once with %+v", log.done, want)
	}
}

// TestRetryAfterTimeline is one consistent timeline of Retry-After: a
// ten-second deadline, attempt 2 starting at three seconds and answered at
// once by a 503 with Retry-After.
func TestRetryAfterTimeline(t *testing.T) {
	t.Run("120 seconds does not fit: stop, return the 503", func(t *testing.T) {
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc,
			httptestutil.Step{Status: 500},
			httptestutil.Step{Status: 503, RetryAfter: "120", Body: "busy"},
			httptestutil.Step{Status: 200},
		)
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Timeout: 10 * time.Second,
			BaseDelay: 4 * time.Second, Jitter: waits(3*time.Second, 0)}
		var o Outcome
		ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
		advance(t, fc, 2, 3*time.Second) // operation deadline + the 3 s backoff
		r := await(t, ch)
		if r.err != nil {
			t.Fatalf("RoundTrip error: %v", r.err)
		}
		if r.resp.StatusCode != 503 {
			t.Errorf("status = %d; want the 503", r.resp.StatusCode)
		}
		if got := base.BodyRead(1); got != 0 {
			t.Errorf("the returned 503 was read (%d bytes) before the caller", got)
		}
		if got := readBody(t, r.resp); got != "busy" {
			t.Errorf("body = %q; want the 503's body", got)
		}
		want := Outcome{Attempts: 2, Reason: RetryAfterExceedsDeadline, Status: 503, Waited: 3 * time.Second, Elapsed: 3 * time.Second}
		if o != want {
			t.Errorf("outcome = %+v; want %+v", o, want)
		}
		if got := base.Hits(); got != 2 {
			t.Errorf("hits = %d; want 2, no third attempt", got)
		}
	})
	t.Run("3 seconds fits: attempt 3 at six seconds", func(t *testing.T) {
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc,
			httptestutil.Step{Status: 500},
			httptestutil.Step{Status: 503, RetryAfter: "3"},
			httptestutil.Step{Status: 200, Body: "ok"},
		)
		var log attemptLog
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Timeout: 10 * time.Second,
			BaseDelay: 4 * time.Second, Jitter: waits(3*time.Second, 0), OnAttempt: log.onAttempt}
		var o Outcome
		ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
		advance(t, fc, 2, 3*time.Second)
		advance(t, fc, 2, 3*time.Second) // exactly the server's delay
		r := await(t, ch)
		if r.err != nil {
			t.Fatalf("RoundTrip error: %v", r.err)
		}
		if got := readBody(t, r.resp); got != "ok" {
			t.Errorf("body = %q", got)
		}
		want := Outcome{Attempts: 3, Reason: Final, Status: 200, Waited: 6 * time.Second, Elapsed: 6 * time.Second}
		if o != want {
			t.Errorf("outcome = %+v; want %+v", o, want)
		}
		if len(log.attempts) != 3 || log.attempts[1].Wait != 3*time.Second {
			t.Errorf("attempts = %+v; want the second to wait exactly 3s", log.attempts)
		}
	})
}

// TestTwoAttemptsInHalfASecond: two attempts of
// 300 ms with a 200 ms wait do not fit a 500 ms budget.
func TestTwoAttemptsInHalfASecond(t *testing.T) {
	t.Run("wait leaves no useful time: stop before sleeping", func(t *testing.T) {
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang}, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Timeout: 500 * ms, AttemptTimeout: 300 * ms,
			BaseDelay: 200 * ms, Jitter: waits(200 * ms)}
		ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		advanceAt(t, fc, base, 1, 2, 300*ms)
		r := await(t, ch)
		var e *Error
		if !errors.As(r.err, &e) {
			t.Fatalf("err = %v; want *Error", r.err)
		}
		want := Outcome{Attempts: 1, Reason: DeadlineExhausted, Elapsed: 300 * ms}
		if e.Attempts != want.Attempts || e.Reason != want.Reason || e.Elapsed != want.Elapsed || e.Waited != 0 {
			t.Errorf("outcome = %+v; want %+v", e.Outcome, want)
		}
		if !e.Timeout() || !errors.Is(r.err, ErrAttemptTimeout) {
			t.Errorf("Timeout() = %v, Is(ErrAttemptTimeout) = %v; want both true", e.Timeout(), errors.Is(r.err, ErrAttemptTimeout))
		}
		if got := base.Hits(); got != 1 {
			t.Errorf("hits = %d; want 1", got)
		}
	})
	t.Run("second attempt gets only the time left", func(t *testing.T) {
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
		var log attemptLog
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Timeout: 500 * ms, AttemptTimeout: 300 * ms,
			BaseDelay: 200 * ms, Jitter: waits(100 * ms), OnAttempt: log.onAttempt}
		ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		advanceAt(t, fc, base, 1, 2, 300*ms)
		advance(t, fc, 2, 100*ms)
		advanceAt(t, fc, base, 2, 2, 100*ms) // attempt 2 ends with the operation, at 500 ms
		r := await(t, ch)
		var e *Error
		if !errors.As(r.err, &e) {
			t.Fatalf("err = %v; want *Error", r.err)
		}
		if e.Reason != AttemptsExhausted || e.Attempts != 2 || e.Elapsed != 500*ms {
			t.Errorf("outcome = %+v; want attempts_exhausted after 2 attempts at 500ms", e.Outcome)
		}
		if len(log.attempts) != 2 || log.attempts[1].Duration != 100*ms {
			t.Errorf("attempts = %+v; want the second to last 100ms", log.attempts)
		}
	})
}

func TestNoSleepAfterFinalAttempt(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Jitter: waits(50 * ms), OnAttempt: log.onAttempt}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 50*ms)
	// No further Advance: RoundTrip must return without waiting again.
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the last 503", r.resp, r.err)
	}
	readBody(t, r.resp)
	want := Outcome{Attempts: 2, Reason: AttemptsExhausted, Status: 503, Waited: 50 * ms, Elapsed: 50 * ms}
	if o != want {
		t.Errorf("outcome = %+v; want %+v", o, want)
	}
	if log.attempts[1].Wait != 0 {
		t.Errorf("last attempt's Wait = %v; want 0", log.attempts[1].Wait)
	}
	if got := base.OpenBodies(); got != 0 {
		t.Errorf("%d response bodies left open", got)
	}
	if !base.BodyClosed(0) || base.BodyRead(0) != 0 && !base.BodyClosed(0) {
		t.Errorf("the discarded first 503 was not closed")
	}
}

func TestBackoffWindowsInLoop(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	var windows []time.Duration
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 5, BaseDelay: 100 * ms, MaxDelay: 300 * ms,
		Budget: Unlimited,
		Jitter: func(w time.Duration) time.Duration { windows = append(windows, w); return w }}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	for _, d := range []time.Duration{100 * ms, 200 * ms, 300 * ms, 300 * ms} {
		advance(t, fc, 1, d)
	}
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	want := []time.Duration{100 * ms, 200 * ms, 300 * ms, 300 * ms}
	if len(windows) != len(want) {
		t.Fatalf("windows = %v; want %v", windows, want)
	}
	for i := range want {
		if windows[i] != want[i] {
			t.Errorf("window %d = %v; want %v", i, windows[i], want[i])
		}
	}
}

func TestRetryAfterIsAMinimum(t *testing.T) {
	tests := []struct {
		name       string
		timeout    time.Duration
		retryAfter string
		jitter     time.Duration
		wantWait   time.Duration
	}{
		// S + jitter, never truncated by MaxDelay (1s here).
		{"server delay plus jitter", 0, "2", 300 * ms, 2300 * ms},
		{"server delay above MaxDelay kept", 0, "4", 0, 4 * time.Second},
		// S fits but S + jitter does not: only the jitter shrinks.
		{"jitter shortened to fit", 3 * time.Second, "2", 990 * ms, 2900 * ms},
		{"past date is zero server delay", 0, "Sat, 05 Sep 2020 12:00:00 GMT", 200 * ms, 200 * ms},
		{"garbage falls back to backoff", 0, "soon", 250 * ms, 250 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc,
				httptestutil.Step{Status: 429, RetryAfter: tt.retryAfter},
				httptestutil.Step{Status: 200})
			var log attemptLog
			tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Timeout: tt.timeout,
				BaseDelay: time.Second, MaxDelay: time.Second, Jitter: waits(tt.jitter), OnAttempt: log.onAttempt}
			ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			n := 1
			if tt.timeout > 0 {
				n = 2
			}
			advance(t, fc, n, tt.wantWait)
			r := await(t, ch)
			if r.err != nil {
				t.Fatal(r.err)
			}
			readBody(t, r.resp)
			if len(log.attempts) != 2 || log.attempts[0].Wait != tt.wantWait {
				t.Errorf("attempts = %+v; want a first wait of %v", log.attempts, tt.wantWait)
			}
		})
	}
}

func TestRetryAfterOnlyOn429And503(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 500, RetryAfter: "600"},
		httptestutil.Step{Status: 200})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(10 * ms), OnAttempt: log.onAttempt}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 10*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if log.attempts[0].Wait != 10*ms {
		t.Errorf("wait after a 500 with Retry-After = %v; want the local 10ms", log.attempts[0].Wait)
	}
}

func TestRetryAfterTooLong(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503, RetryAfter: "31"})
	var o Outcome
	tr := &Transport{Base: base, Clock: fc}
	r := await(t, start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)))
	if r.err != nil || r.resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the 503", r.resp, r.err)
	}
	readBody(t, r.resp)
	if o.Reason != RetryAfterTooLong || o.Attempts != 1 {
		t.Errorf("outcome = %+v; want retry_after_too_long after 1 attempt", o)
	}
	// A huge value saturates rather than overflowing into a short wait.
	base = httptestutil.NewTransport(fc, httptestutil.Step{Status: 429, RetryAfter: "999999999999999999999"})
	tr = &Transport{Base: base, Clock: fc}
	r = await(t, start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if o.Reason != RetryAfterTooLong || base.Hits() != 1 {
		t.Errorf("outcome = %+v, hits %d; want retry_after_too_long after 1 attempt", o, base.Hits())
	}
}

// TestAnsweredPOSTIsNeverTakenForUnsent: a Base that asks for a
// connection and answers without one (a layer that fails to dial and
// answers from elsewhere) leaves a connection trace that looks unsent;
// its answer still proves the request was handled. A POST answered 503
// so, with OnAttempt set (which traces every attempt), is not repeated:
// an answer is never "unsent".
func TestAnsweredPOSTIsNeverTakenForUnsent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		if trace := httptrace.ContextClientTrace(r.Context()); trace != nil && trace.GetConn != nil {
			trace.GetConn(r.URL.Host)
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	var reported []Attempt
	// A retry, were one taken, would wait at most a nanosecond.
	tr := &Transport{Base: base, MaxAttempts: 3, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond,
		OnAttempt: func(_ *http.Request, a Attempt) { reported = append(reported, a) }}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "http://api.test/charge", strings.NewReader("x")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := calls.Load(); n != 1 || len(reported) != 1 {
		t.Fatalf("Base called %d times, OnAttempt %d; want the POST's 503 returned after one attempt", n, len(reported))
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d; want the 503", resp.StatusCode)
	}
}
