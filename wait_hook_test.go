package httpretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// hookLog records the Transport's hooks in the order they ran.
type hookLog struct {
	mu      sync.Mutex
	events  []string
	waits   []Wait
	outcome Outcome
}

func (l *hookLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// install sets every hook of tr to record in l.
func (l *hookLog) install(tr *Transport) {
	tr.OnAttemptStart = func(_ *http.Request, n int) { l.add(fmt.Sprintf("start %d", n)) }
	tr.OnAttempt = func(_ *http.Request, a Attempt) {
		l.add(fmt.Sprintf("attempt %d wait %v", a.Number, a.Wait))
	}
	tr.OnWait = func(_ *http.Request, w Wait) {
		l.add(fmt.Sprintf("waited after %d: %v (server %v)", w.After, w.Waited, w.RetryAfter))
		l.mu.Lock()
		defer l.mu.Unlock()
		l.waits = append(l.waits, w)
	}
	tr.OnDone = func(_ *http.Request, o Outcome) {
		l.add(fmt.Sprintf("done %s waited %v", o.Reason, o.Waited))
		l.mu.Lock()
		defer l.mu.Unlock()
		l.outcome = o
	}
}

func (l *hookLog) check(t *testing.T, want ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(l.events, want) {
		t.Errorf("hooks ran:\n\t%s\nwant:\n\t%s", join(l.events), join(want))
	}
	var sum time.Duration
	for _, w := range l.waits {
		sum += w.Waited
	}
	if sum != l.outcome.Waited {
		t.Errorf("the waits OnWait reported add up to %v; Outcome.Waited is %v", sum, l.outcome.Waited)
	}
}

func join(s []string) string {
	out := ""
	for i, e := range s {
		if i > 0 {
			out += "\n\t"
		}
		out += e
	}
	return out
}

// identityJitter draws the whole window: a known wait.
func identityJitter(d time.Duration) time.Duration { return d }

// TestOnWaitReportsTheTimeWaitedOfACutWait: after a 429 with
// Retry-After: 2 the Transport plans a wait of 2 s and its 100 ms of
// jitter (Attempt.Wait, as scheduled); the caller cancels after 0.5 s, or
// 2.05 s. OnWait reports the time actually waited, the server's part
// first, and the waits add up to Outcome.Waited.
func TestOnWaitReportsTheTimeWaitedOfACutWait(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cutAt  time.Duration
		server time.Duration
	}{
		{500 * time.Millisecond, 500 * time.Millisecond},
		{2050 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tt.cutAt.String(), func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 429, RetryAfter: "2"})
			tr := &Transport{Base: base, Clock: fc, BaseDelay: 100 * time.Millisecond, Jitter: identityJitter, Budget: Unlimited}
			var log hookLog
			log.install(tr)
			ctx, cancel := context.WithCancel(context.Background())
			ch := start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))
			advance(t, fc, 1, tt.cutAt)
			cancel()
			if r := await(t, ch); r.err == nil {
				r.resp.Body.Close()
				t.Fatal("a canceled wait returned a response")
			}
			log.check(t,
				"start 1",
				"attempt 1 wait 2.1s",
				fmt.Sprintf("waited after 1: %v (server %v)", tt.cutAt, tt.server),
				fmt.Sprintf("done canceled waited %v", tt.cutAt),
			)
		})
	}
}

// TestOnWaitOncePerWaitBetweenAttempts: three attempts, a 503 with
// Retry-After: 1 and a 500 before the 200: OnWait runs once per wait,
// after the OnAttempt that planned it and before the next OnAttemptStart,
// a wait of 0 included, and the waits add up to Outcome.Waited.
func TestOnWaitOncePerWaitBetweenAttempts(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 503, RetryAfter: "1"}, httptestutil.Step{Status: 500}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(50*time.Millisecond, 0), Budget: Unlimited}
	var log hookLog
	log.install(tr)
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 1050*time.Millisecond)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	log.check(t,
		"start 1",
		"attempt 1 wait 1.05s",
		"waited after 1: 1.05s (server 1s)",
		"start 2",
		"attempt 2 wait 0s",
		"waited after 2: 0s (server 0s)",
		"start 3",
		"attempt 3 wait 0s",
		"done final waited 1.05s",
	)
}

// TestOnWaitReportsAWaitThatTheTimeoutEnds: a wake-up that comes late,
// past the operation's Timeout (the process was stopped), ends the
// operation with deadline_exhausted; OnWait reports the whole time
// waited, late part included, as Outcome.Waited does.
func TestOnWaitReportsAWaitThatTheTimeoutEnds(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 500})
	tr := &Transport{Base: base, Clock: fc, Jitter: identityJitter, BaseDelay: 400 * time.Millisecond,
		Timeout: time.Second, MinAttemptTime: 100 * time.Millisecond, Budget: Unlimited}
	var log hookLog
	log.install(tr)
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 2, 1200*time.Millisecond) // the Timeout's timer and the wait's
	if r := await(t, ch); r.err == nil {
		r.resp.Body.Close()
		t.Fatal("a wait past the Timeout returned a response")
	}
	log.check(t,
		"start 1",
		"attempt 1 wait 400ms",
		"waited after 1: 1.2s (server 0s)",
		"done deadline_exhausted waited 1.2s",
	)
}

// TestOnWaitReportsAQuotaWaitBeforeTheFirstAttempt: with WaitQuota, an
// operation whose destination's quota is spent waits for its reset before
// its first attempt; OnWait reports that wait (After 0), all of it the
// server's, and Outcome.Waited holds it.
func TestOnWaitReportsAQuotaWaitBeforeTheFirstAttempt(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := quotaSpentOnce(func() {})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{WaitQuota: true}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first: %v, %v; want the 429 that spends the quota", resp, err)
	}
	var log hookLog
	log.install(tr)
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 2*time.Second)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("held: %v, %v; want 200 after the reset", r.resp, r.err)
	}
	log.check(t,
		"waited after 0: 2s (server 2s)",
		"start 1",
		"attempt 1 wait 0s",
		"done final waited 2s",
	)
}

// TestAttemptDurationLeavesOutTheQuotaWaitBeforeIt: an attempt's Duration
// is its own time in Base, from when it was sent: a quota waited for
// before the first attempt is the operation's (Outcome.Waited), never the
// attempt's, whose start is read after the wait.
func TestAttemptDurationLeavesOutTheQuotaWaitBeforeIt(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := quotaSpentOnce(func() { fc.Advance(100 * time.Millisecond) })
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{WaitQuota: true}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first: %v, %v; want the 429 that spends the quota", resp, err)
	}
	var durations []time.Duration
	tr.OnAttempt = func(_ *http.Request, a Attempt) { durations = append(durations, a.Duration) }
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 2*time.Second)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("held: %v, %v; want 200 after the reset", r.resp, r.err)
	}
	if len(durations) != 1 || durations[0] != 100*time.Millisecond {
		t.Fatalf("attempt durations %v; want [100ms]: the 2s waited for the quota is not the attempt's", durations)
	}
}

// TestAttemptDurationLeavesOutTheBodyReadBeforeIt: a request body with no
// GetBody is read into memory before the first attempt; a caller's body
// that takes a second to read takes it from the operation (its Timeout
// counts it), not from the attempt, whose Duration is its own time in
// Base.
func TestAttemptDurationLeavesOutTheBodyReadBeforeIt(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fc.Advance(100 * time.Millisecond)
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var durations []time.Duration
	var o Outcome
	tr := &Transport{Base: base, Clock: fc, OnAttempt: func(_ *http.Request, a Attempt) { durations = append(durations, a.Duration) }}
	body := clockedBody{clock: fc, took: time.Second, r: strings.NewReader("payload")}
	req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://api.test/items/1", io.NopCloser(&body))
	req.ContentLength, req.GetBody = int64(len("payload")), nil
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip: %v, %v; want 200", resp, err)
	}
	if len(durations) != 1 || durations[0] != 100*time.Millisecond {
		t.Errorf("attempt durations %v; want [100ms]: the 1s the body took to read is not the attempt's", durations)
	}
	if o.Elapsed != 1100*time.Millisecond {
		t.Errorf("operation elapsed %v; want 1.1s, the body's read included", o.Elapsed)
	}
}

// clockedBody is a request body whose first Read moves the fake clock by took.
type clockedBody struct {
	clock *clockwork.FakeClock
	took  time.Duration
	r     io.Reader
	read  bool
}

func (b *clockedBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		b.clock.Advance(b.took)
	}
	return b.r.Read(p)
}

// TestFirstAttemptNothingDelayedReadsTheClockOnce: an operation whose
// first attempt nothing delayed (no quota wait, no body read into memory)
// starts that attempt when the operation started: one reading of the
// clock's Now for the whole operation, hedged or with an attempt timeout,
// with no body or with a body the caller's GetBody can give again.
func TestFirstAttemptNothingDelayedReadsTheClockOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		hedging *Hedging
		method  string
		body    string
	}{
		{"attempt timeout, GET", nil, "GET", ""},
		{"attempt timeout, PUT with GetBody", nil, "PUT", "payload"},
		{"hedged, GET", &Hedging{Delay: time.Second}, "GET", ""},
	} {
		fc := &nowCounter{FakeClock: clockwork.NewFakeClock()}
		tr := &Transport{Clock: fc, Hedging: c.hedging}
		if c.hedging == nil {
			tr.AttemptTimeout = time.Second
		}
		tr.Base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), c.method, "http://api.test/items/1", body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: RoundTrip: %v, %v; want 200", c.name, resp, err)
		}
		resp.Body.Close()
		if n := fc.nows.Load(); n != 1 {
			t.Errorf("%s: the clock's Now read %d times; want 1", c.name, n)
		}
	}
}

// nowCounter is a fake clock that counts the readings of its Now.
type nowCounter struct {
	*clockwork.FakeClock
	nows atomic.Int32
}

func (c *nowCounter) Now() time.Time {
	c.nows.Add(1)
	return c.FakeClock.Now()
}

// TestAttemptStartsAfterTheCallersCodeBeforeIt: the caller's own code that
// runs before the first attempt (NewIdempotencyKey making the key,
// Idempotent judging the request, the Throttle's Key naming its
// destination) may take time, and that time is the operation's, not the
// attempt's: the attempt starts when it is sent, so its Duration (the
// latency a hedged operation learns) leaves the hook out and its
// AttemptTimeout runs in full from the send.
func TestAttemptStartsAfterTheCallersCodeBeforeIt(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	const took, attemptTimeout = time.Second, 5 * time.Second
	for _, c := range []struct {
		name      string
		method    string
		configure func(tr *Transport, slow func())
	}{
		{"NewIdempotencyKey", "POST", func(tr *Transport, slow func()) {
			tr.NewIdempotencyKey = func() string { slow(); return RandomKey() }
		}},
		{"Idempotent", "GET", func(tr *Transport, slow func()) {
			tr.Idempotent = func(r *http.Request) bool { slow(); return IsIdempotent(r) }
		}},
		{"Idempotent, hedged", "GET", func(tr *Transport, slow func()) {
			tr.Idempotent = func(r *http.Request) bool { slow(); return IsIdempotent(r) }
			tr.Hedging = &Hedging{Delay: time.Hour}
		}},
		{"Hedging.Key", "GET", func(tr *Transport, slow func()) {
			tr.Hedging = &Hedging{Delay: time.Hour, Key: func(r *http.Request) string { slow(); return r.URL.Host }}
		}},
		{"Throttle.Key", "GET", func(tr *Transport, slow func()) {
			tr.Throttle = &throttle.Throttle{Key: func(r *http.Request) string { slow(); return r.URL.Host }}
		}},
	} {
		fc := clockwork.NewFakeClock()
		var sent time.Time
		var limit time.Time
		tr := &Transport{Clock: fc, AttemptTimeout: attemptTimeout, MaxAttempts: 2}
		inner := &http.Transport{}
		defer inner.CloseIdleConnections()
		tr.Base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = fc.Now()
			limit, _ = r.Context().Deadline()
			fc.Advance(100 * time.Millisecond)
			return inner.RoundTrip(r)
		})
		var log attemptLog
		tr.OnAttempt = log.onAttempt
		c.configure(tr, func() { fc.Advance(took) })
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), c.method, srv.URL, nil))
		if err != nil {
			t.Fatalf("%s: RoundTrip: %v", c.name, err)
		}
		resp.Body.Close()
		if len(log.attempts) != 1 || log.attempts[0].Duration != 100*time.Millisecond {
			t.Errorf("%s: attempts %+v; want one of 100ms: the %v the hook took is not the attempt's", c.name, log.attempts, took)
		}
		if want := sent.Add(attemptTimeout); !limit.Equal(want) {
			t.Errorf("%s: attempt deadline %v after the send; want %v: the attempt timeout runs from the send", c.name, limit.Sub(sent), attemptTimeout)
		}
	}
}

// TestNothingBeforeAFirstAttemptThatStartsWithItsOperation: a first
// attempt takes its operation's start as its own only when nothing
// between could take time: no quota wait, the caller's request as the
// template (no body read, no key made), no caller's hook.
func TestNothingBeforeAFirstAttemptThatStartsWithItsOperation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		waited          time.Duration
		callersTemplate bool
		hooks           bool
		want            bool
	}{
		{0, true, false, true},
		{time.Nanosecond, true, false, false},
		{0, false, false, false},
		{0, true, true, false},
		{time.Second, false, true, false},
	} {
		if got := nothingBefore(c.waited, c.callersTemplate, c.hooks); got != c.want {
			t.Errorf("nothingBefore(%v, %v, %v) = %v; want %v", c.waited, c.callersTemplate, c.hooks, got, c.want)
		}
	}
}

// quotaSpentOnce is a Base whose first answer is a 429 that spends the
// destination's quota for 2s ("RateLimit: r=0;t=2"); every later one is a
// 200 with quota left, answered after serve runs.
func quotaSpentOnce(serve func()) roundTripFunc {
	var mu sync.Mutex
	spent := true
	return func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		h := http.Header{"Ratelimit": {`"default";r=5;t=2`}}
		status := 200
		if spent {
			h = http.Header{"Ratelimit": {`"default";r=0;t=2`}}
			status, spent = 429, false
		} else {
			serve()
		}
		return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
	}
}
