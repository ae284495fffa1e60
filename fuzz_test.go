package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// FuzzParseRetryAfter checks ParseRetryAfter on any header value, Date
// header and arrival time: it never panics, never returns a negative
// delay or a delay with ok false, agrees with a math/big reference on
// delta-seconds, converts dates as RFC 9110 says, never grows as time
// passes, and gives the same answer twice.
func FuzzParseRetryAfter(f *testing.F) {
	const now = 1788609600 // 2026-09-05 12:00:00 UTC
	for _, v := range []string{
		"120", "0", "007", " 3\t", "-5", "+5", "1.5", "", "soon", "12abc", "1 2",
		"999999999999999999999", "9223372036", "9223372037", "99999999999999999999x",
		"Sat, 05 Sep 2026 12:00:01 GMT", "Saturday, 05-Sep-26 12:00:30 GMT", "Sat Sep  5 12:01:00 2026",
		"Sat, 05 Sep 2026 11:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
		"Sat, 05 Sep 2026 12:00:01 PST", "٣", "\x00", "1\r\n",
	} {
		f.Add(v, "", int64(now))
	}
	f.Add("Sat, 05 Sep 2026 12:00:10 GMT", "Sat, 05 Sep 2026 12:00:08 GMT", int64(now))
	f.Add("Sat, 05 Sep 2026 13:00:05 GMT", "Sat, 05 Sep 2026 13:00:00 GMT", int64(now))
	f.Add("Sat, 05 Sep 2026 12:00:04 GMT", "yesterday", int64(now))
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", int64(-62135596800))
	f.Fuzz(func(t *testing.T, value, date string, unix int64) {
		h := http.Header{}
		h.Set("Retry-After", value)
		if date != "" {
			h.Set("Date", date)
		}
		at := time.Unix(unix, 0).UTC()
		d, ok := ParseRetryAfter(h, at)
		if d2, ok2 := ParseRetryAfter(h, at); d2 != d || ok2 != ok {
			t.Fatalf("not deterministic: %v, %v then %v, %v", d, ok, d2, ok2)
		}
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want a delay ≥ 0, and 0 when not ok", value, d, ok)
		}

		v := strings.Trim(value, " \t")
		if want, digits := refDelaySeconds(v); digits {
			if !ok || d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; the reference says %v, true", value, d, ok, want)
			}
			// Seconds do not depend on the clock.
			if d2, _ := ParseRetryAfter(h, at.Add(time.Hour)); d2 != d {
				t.Fatalf("delay-seconds %q changed with now: %v then %v", value, d, d2)
			}
			return
		}
		when, err := http.ParseTime(v)
		if err != nil {
			if ok || d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want 0, false for a value that is neither seconds nor a date", value, d, ok)
			}
			return
		}
		base := at
		if sd, err := http.ParseTime(h.Get("Date")); err == nil {
			base = sd
		}
		if want := max(when.Sub(base), 0); !ok || d != want {
			t.Fatalf("ParseRetryAfter(%q, Date %q) = %v, %v; want %v, true", value, date, d, ok, want)
		}
		// Later arrival never means a longer wait.
		if d2, ok2 := ParseRetryAfter(h, at.Add(time.Second)); !ok2 || d2 > d {
			t.Fatalf("ParseRetryAfter(%q) grew from %v to %v a second later", value, d, d2)
		}
	})
}

// refDelaySeconds is the reference for delay-seconds (RFC 9110 §10.2.3:
// 1*DIGIT, with a decimal fraction some APIs add): arbitrary precision,
// then saturation at the largest Duration.
// It reports false when v is not delay-seconds.
func refDelaySeconds(v string) (time.Duration, bool) {
	whole, frac, _ := strings.Cut(v, ".")
	if whole == "" {
		return 0, false
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, false
			}
		}
	}
	// Nanoseconds: the whole seconds, then the fraction's first nine
	// digits, padded.
	ns := (frac + "000000000")[:9]
	n, _ := new(big.Int).SetString(whole+ns, 10)
	if n.Cmp(big.NewInt(int64(maxDuration))) > 0 {
		return maxDuration, true
	}
	return time.Duration(n.Int64()), true
}

// FuzzTransport plays a fuzzer-chosen script of attempt outcomes (status,
// Retry-After, should-retry headers, error kind, duration, body), under a fuzzer-chosen policy,
// method and deadline, through an in-memory Base on a fake clock, and
// checks on every input: attempts ≤ MaxAttempts; no retry starts with
// less than MinAttemptTime left; no attempt outlives AttemptTimeout or the
// deadline; a retry after an honoured Retry-After waits at least the
// server's delay; the returned response is the last one Base produced,
// unread, and every other was closed; a POST without a key goes again only
// after a dial error or the server's explicit word that it may; every
// attempt sends the whole body and the same key; nothing is waited after
// the last attempt; OnAttempt, OnDone, WithOutcome, the Logger and the
// *Error agree; and, judged by docs/rules.md's "Stop reasons" table and its
// sentences on waits (fzCheckRules), no stop held after an attempt that
// was retried, each wait is the one docs/rules.md describes, and the reason
// is the first row of the table that holds after the last attempt.
//
// How time passes, deterministically and without counting waiters by
// hand:
//   - The Base (fzBase) advances the fake clock itself by the attempt's
//     duration before it answers. When that would reach the request's
//     deadline, it advances to the deadline only, waits for the context
//     to end, and fails as a real transport would.
//   - Waits between attempts are on a fake timer the Transport creates
//     after OnAttempt reports the wait. The OnAttempt hook (on RoundTrip's
//     goroutine, where nothing else is registering timers) measures the
//     fake clock's waiter count and hands the driver that count and the
//     wait; the driver blocks until one more waiter (the wait's timer)
//     appears and advances by exactly the wait.
//   - Jitter returns a fixed, fuzzer-chosen fraction of the window.
//
// A waiter count measured this way needs no knowledge of which contexts
// the Transport derives. Nothing depends on real time except the drain's
// 200ms bound, which in-memory bodies never reach.
func FuzzTransport(f *testing.F) {
	for _, seed := range fzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := fzDecode(data)
		fzRun(t, sc)
	})
}

// fzSeeds are FuzzTransport's f.Add seeds, written with fzSeed's
// field-per-byte layout (see fzDecode).
var fzSeeds = [][]byte{
	// GET, 3 attempts, Timeout 1s: 503 then 200.
	fzSeed(fzPolicy{attempts: 2, timeout: 2}, 0, fzStepB{status: 5}, fzStepB{status: 0}),
	// PUT, 5 attempts, no deadline: refused, reset, EOF, 429 Retry-After 1, 200.
	fzSeed(fzPolicy{attempts: 4}, 1, fzStepB{kind: 1}, fzStepB{kind: 2}, fzStepB{kind: 3},
		fzStepB{status: 4, ra: 2}, fzStepB{}),
	// POST without a key: refused twice, then reset: not_idempotent.
	fzSeed(fzPolicy{attempts: 4, timeout: 3}, 2, fzStepB{kind: 1}, fzStepB{kind: 1}, fzStepB{kind: 2}),
	// POST with a key, AttemptTimeout 50ms, hanging: attempts time out.
	fzSeed(fzPolicy{attempts: 2, timeout: 2, attemptTimeout: 1}, 3, fzStepB{kind: 4}),
	// Caller deadline 500ms, 503 with Retry-After 1: exceeds the deadline.
	fzSeed(fzPolicy{attempts: 2, callerDeadline: 1}, 0, fzStepB{status: 5, ra: 2}),
	// Retry-After 30 with MaxRetryAfter 1s and no deadline: too long.
	fzSeed(fzPolicy{attempts: 2, maxRetryAfter: 1}, 0, fzStepB{status: 4, ra: 4}),
	// Budget of 0: budget_exhausted.
	fzSeed(fzPolicy{attempts: 2, budget: 2}, 0, fzStepB{status: 5}),
	// BufferResponse 64, a 200 whose body resets midway, then a 200.
	fzSeed(fzPolicy{attempts: 2, timeout: 4, bufferResponse: 2}, 0, fzStepB{body: 2, fails: 1}, fzStepB{body: 2}),
	// Slow 500s eating the deadline: 1s each, and 1s waits, under Timeout
	// 3s; the second attempt runs into the deadline.
	fzSeed(fzPolicy{attempts: 4, timeout: 3, jitter: 4, baseDelay: 3}, 1, fzStepB{status: 6, dur: 3}),
	// Caller deadline 2s, AttemptTimeout 200ms, MinAttemptTime 500ms,
	// half-window jitter from 100ms: a reset, then hangs, waits doubling.
	fzSeed(fzPolicy{attempts: 4, callerDeadline: 2, attemptTimeout: 2, baseDelay: 2, jitter: 2, minAttempt: 3},
		3, fzStepB{kind: 2, dur: 2}, fzStepB{kind: 4}),
	// A 404 the server says to retry, then a 503 it says not to.
	fzSeed(fzPolicy{attempts: 3, timeout: 3}, 1, fzStepB{status: 2, should: 1}, fzStepB{status: 5, should: 2}),
	// A POST without a key: the server's "true" on a 503 makes it safe to
	// send again.
	fzSeed(fzPolicy{attempts: 3}, 2, fzStepB{status: 5, should: 3}),
	// Retry-After as a date 2s after the server's Date, then a past date.
	fzSeed(fzPolicy{attempts: 3, timeout: 4}, 0, fzStepB{status: 5, ra: 6}, fzStepB{status: 4, ra: 7}, fzStepB{}),
}

// fzPolicy is the decoded policy: indexes into the fz* choice tables.
type fzPolicy struct {
	attempts, timeout, callerDeadline, attemptTimeout, minAttempt, baseDelay,
	maxDelay, maxRetryAfter, jitter, budget, bufferResponse byte
}

// fzStepB is one decoded step: indexes into the choice tables.
type fzStepB struct{ kind, status, ra, dur, body, fails, should byte }

// The choice tables. Index 0 is always the zero value or the common case,
// so that short inputs (read as zeros past their end) stay meaningful.
// fzSeeds and the stored corpus (testdata/fuzz/FuzzTransport) name
// entries by index: an entry inserted or removed changes what they test.
var (
	fzTimeouts        = []time.Duration{0, 300 * ms, time.Second, 3 * time.Second, 10 * time.Second}
	fzCallerDeadlines = []time.Duration{0, 500 * ms, 2 * time.Second, 20 * time.Second}
	fzAttemptTimeouts = []time.Duration{0, 50 * ms, 200 * ms, time.Second}
	fzMinAttempts     = []time.Duration{0, 10 * ms, 100 * ms, 500 * ms}
	fzBaseDelays      = []time.Duration{0, 10 * ms, 100 * ms, time.Second}
	fzMaxDelays       = []time.Duration{0, 50 * ms, time.Second}
	fzMaxRetryAfters  = []time.Duration{0, time.Second, 5 * time.Second}
	fzBufferResponses = []int64{0, 4, 64}
	fzDurations       = []time.Duration{0, 10 * ms, 100 * ms, time.Second, 5 * time.Second}
	fzStatuses        = []int{200, 201, 404, 408, 429, 503, 500, 409}
	fzBodySizes       = []int{0, 3, 50, 100}
	// fzShouldRetry are the servers' should-retry headers a response may
	// carry, and what they say on an error response: "" for nothing valid.
	fzShouldRetry = []struct {
		h    http.Header
		says string
	}{
		{nil, ""},
		{http.Header{"X-Should-Retry": {"true"}}, "true"},
		{http.Header{"X-Should-Retry": {" FALSE "}}, "false"},
		{http.Header{"Stripe-Should-Retry": {"True"}}, "true"},
		{http.Header{"Stripe-Should-Retry": {"false"}}, "false"},
		{http.Header{"X-Should-Retry": {"maybe"}}, ""},
		{http.Header{"X-Should-Retry": {"false"}, "Stripe-Should-Retry": {"true"}}, "false"}, // X- wins
		{http.Header{"X-Should-Retry": {"1"}, "Stripe-Should-Retry": {"true"}}, "true"},      // X- invalid
	}
	fzMethods = []string{"GET", "PUT", "POST", "POST+key"}
)

// fzRetryAfter is a Retry-After choice with what it means (relative to
// the response's Date header, which fzBase always sends).
type fzRetryAfter struct {
	value func(date time.Time) string
	delay time.Duration
	ok    bool
}

var fzRetryAfters = []fzRetryAfter{
	{value: func(time.Time) string { return "" }},
	{value: func(time.Time) string { return "0" }, ok: true},
	{value: func(time.Time) string { return "1" }, delay: time.Second, ok: true},
	{value: func(time.Time) string { return "3" }, delay: 3 * time.Second, ok: true},
	{value: func(time.Time) string { return "30" }, delay: 30 * time.Second, ok: true},
	{value: func(time.Time) string { return "999999999999999999999" }, delay: maxDuration, ok: true},
	{value: func(d time.Time) string { return d.Add(2 * time.Second).Format(http.TimeFormat) }, delay: 2 * time.Second, ok: true},
	{value: func(d time.Time) string { return d.Add(-time.Hour).Format(http.TimeFormat) }, ok: true},
	{value: func(time.Time) string { return "soon" }},
	{value: func(time.Time) string { return "-1" }},
	{value: func(time.Time) string { return "1.5" }, delay: 1500 * time.Millisecond, ok: true},
	{value: func(time.Time) string { return "1.5s" }},
}

// Step kinds.
const (
	fzRespond = iota
	fzRefused // a dial error: the request never left
	fzReset   // a reset after the request was sent
	fzEOF     // the server closed the connection before answering
	fzHang    // no answer until the request's deadline
	fzKinds
)

// fzStep is one decoded attempt outcome.
type fzStep struct {
	kind   int
	status int
	ra     fzRetryAfter
	dur    time.Duration
	size   int
	fails  bool // the body resets halfway
	should int  // index into fzShouldRetry
}

// fzScenario is one decoded input.
type fzScenario struct {
	maxAttempts    int
	timeout        time.Duration
	callerDeadline time.Duration
	attemptTimeout time.Duration
	minAttempt     time.Duration
	baseDelay      time.Duration
	maxDelay       time.Duration
	maxRetryAfter  time.Duration
	jitterQuarters int // Jitter returns window·jitterQuarters/4
	budget         int // 0: Unlimited; 1: NewTokenBucket(1, 0); 2: NewTokenBucket(0, 0)
	bufferResponse int64
	method         string
	steps          []fzStep
}

// fzReader hands out the fuzzer's bytes, then zeros.
type fzReader struct{ b []byte }

func (r *fzReader) pick(n int) int {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return int(c) % n
}

// fzDecode reads a scenario: the policy fields in fzPolicy's order, the
// method, the number of steps (1 to 6), then seven bytes per step in
// fzStepB's order.
func fzDecode(data []byte) fzScenario {
	r := &fzReader{b: data}
	sc := fzScenario{
		maxAttempts:    1 + r.pick(5),
		timeout:        fzTimeouts[r.pick(len(fzTimeouts))],
		callerDeadline: fzCallerDeadlines[r.pick(len(fzCallerDeadlines))],
		attemptTimeout: fzAttemptTimeouts[r.pick(len(fzAttemptTimeouts))],
		minAttempt:     fzMinAttempts[r.pick(len(fzMinAttempts))],
		baseDelay:      fzBaseDelays[r.pick(len(fzBaseDelays))],
		maxDelay:       fzMaxDelays[r.pick(len(fzMaxDelays))],
		maxRetryAfter:  fzMaxRetryAfters[r.pick(len(fzMaxRetryAfters))],
		jitterQuarters: r.pick(5),
		budget:         r.pick(3),
		bufferResponse: fzBufferResponses[r.pick(len(fzBufferResponses))],
		method:         fzMethods[r.pick(len(fzMethods))],
	}
	n := 1 + r.pick(6)
	for range n {
		sc.steps = append(sc.steps, fzStep{
			kind:   r.pick(fzKinds),
			status: fzStatuses[r.pick(len(fzStatuses))],
			ra:     fzRetryAfters[r.pick(len(fzRetryAfters))],
			dur:    fzDurations[r.pick(len(fzDurations))],
			size:   fzBodySizes[r.pick(len(fzBodySizes))],
			fails:  r.pick(2) == 1,
			should: r.pick(len(fzShouldRetry)),
		})
	}
	return sc
}

// fzSeed encodes a scenario for fzDecode.
func fzSeed(p fzPolicy, method byte, steps ...fzStepB) []byte {
	b := []byte{p.attempts, p.timeout, p.callerDeadline, p.attemptTimeout, p.minAttempt, p.baseDelay,
		p.maxDelay, p.maxRetryAfter, p.jitter, p.budget, p.bufferResponse, method, byte(len(steps) - 1)}
	for _, s := range steps {
		b = append(b, s.kind, s.status, s.ra, s.dur, s.body, s.fails, s.should)
	}
	return b
}

// fzCall is what fzBase recorded of one attempt.
type fzCall struct {
	step       fzStep
	kind       int // step.kind, except a hang with no deadline to end it: a reset
	start, end time.Time
	deadline   time.Time // the request context's, zero if none
	timedOut   bool      // the deadline came first
	resp       *http.Response
	body       *fzBody
	err        error
	reqBody    string
	key        string
	hasKey     bool
}

// fzBase is the scripted in-memory Base; see FuzzTransport.
type fzBase struct {
	fc    *clockwork.FakeClock
	steps []fzStep

	mu    sync.Mutex // protects calls
	calls []*fzCall
}

func (b *fzBase) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Body != nil {
		sent, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	b.mu.Lock()
	n := len(b.calls)
	c := &fzCall{step: b.steps[min(n, len(b.steps)-1)], start: b.fc.Now(), reqBody: string(sent)}
	c.key = req.Header.Get(IdempotencyKeyHeader)
	_, c.hasKey = req.Header[IdempotencyKeyHeader]
	b.calls = append(b.calls, c)
	b.mu.Unlock()

	ctx := req.Context()
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		c.deadline = dl
	}
	if c.kind = c.step.kind; c.kind == fzHang && !hasDeadline {
		c.kind = fzReset // nothing would ever end the hang
	}
	kind := c.kind
	if hasDeadline && (kind == fzHang || !b.fc.Now().Add(c.step.dur).Before(dl)) {
		if d := dl.Sub(b.fc.Now()); d > 0 {
			b.fc.Advance(d)
		}
		<-ctx.Done() // closed asynchronously after the fake timer fires
		c.timedOut, c.err, c.end = true, ctx.Err(), b.fc.Now()
		return nil, c.err
	}
	b.fc.Advance(c.step.dur)
	c.end = b.fc.Now()
	switch kind {
	case fzRefused:
		c.err = httptestutil.ErrRefused
	case fzReset:
		c.err = httptestutil.ErrReset
	case fzEOF:
		c.err = fmt.Errorf("fz: server closed the connection: %w", io.EOF)
	default:
		content := bytes.Repeat([]byte{byte('a' + n%26)}, c.step.size)
		c.body = &fzBody{data: content, fails: c.step.fails}
		h := fzShouldRetry[c.step.should].h.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("Date", c.end.UTC().Format(http.TimeFormat))
		if v := c.step.ra.value(c.end.UTC().Truncate(time.Second)); v != "" {
			h.Set("Retry-After", v)
		}
		c.resp = &http.Response{StatusCode: c.step.status, Header: h, Body: c.body,
			ContentLength: int64(c.step.size), Request: req}
		return c.resp, nil
	}
	return nil, c.err
}

func (b *fzBase) snapshot() []*fzCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fzCall(nil), b.calls...)
}

// dialError reports whether the attempt failed to connect: the request
// never left.
func (c *fzCall) dialError() bool { return c.kind == fzRefused && !c.timedOut }

// fzBody is a response body that records reads and Close, and can reset
// halfway.
type fzBody struct {
	data   []byte
	fails  bool
	mu     sync.Mutex
	off    int
	closed bool
}

func (b *fzBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("fz: read after close")
	}
	end := len(b.data)
	if b.fails {
		end /= 2
	}
	if b.off >= end {
		if b.fails {
			return 0, httptestutil.ErrReset
		}
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:end])
	b.off += n
	return n, nil
}

func (b *fzBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

func (b *fzBody) state() (read int, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.off, b.closed
}

// fzWaiters returns how many waiters the fake clock has, through the only
// public window on that number: BlockUntilContext returns at once, with
// nil, exactly when at least n are registered. (A context that has ended
// makes the others return at once too; each leaves a blocker registered
// in the clock, which is harmless.)
func fzWaiters(fc *clockwork.FakeClock) int {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	for fc.BlockUntilContext(ended, n+1) == nil {
		n++
	}
	return n
}

// fzWait is a wait the OnAttempt hook announced after attempt number:
// the driver advances the clock by d once the clock has more than waiters
// waiters.
type fzWait struct {
	number  int
	waiters int
	d       time.Duration
}

// fzRun plays one scenario and checks every invariant.
func fzRun(t *testing.T, sc fzScenario) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC))
	base := &fzBase{fc: fc, steps: sc.steps}
	waitc := make(chan fzWait)
	quit := make(chan struct{})
	defer close(quit)

	var mu sync.Mutex
	var attempts []Attempt
	var dones []Outcome
	var waitsDone []Wait
	var logs bytes.Buffer
	var budget Budget = Unlimited
	switch sc.budget {
	case 1:
		budget = NewTokenBucket(1, 0)
	case 2:
		budget = NewTokenBucket(0, 0)
	}
	tr := &Transport{
		Base:           base,
		Clock:          fc,
		MaxAttempts:    sc.maxAttempts,
		Timeout:        sc.timeout,
		AttemptTimeout: sc.attemptTimeout,
		MinAttemptTime: sc.minAttempt,
		BaseDelay:      sc.baseDelay,
		MaxDelay:       sc.maxDelay,
		MaxRetryAfter:  sc.maxRetryAfter,
		BufferResponse: sc.bufferResponse,
		Budget:         budget,
		Jitter:         func(w time.Duration) time.Duration { return w / 4 * time.Duration(sc.jitterQuarters) },
		Logger:         slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil)),
		OnAttempt: func(_ *http.Request, a Attempt) {
			mu.Lock()
			attempts = append(attempts, a)
			mu.Unlock()
			if a.Wait > 0 {
				select {
				case waitc <- fzWait{a.Number, fzWaiters(fc), a.Wait}:
				case <-quit:
				}
			}
		},
		OnWait: func(_ *http.Request, w Wait) {
			mu.Lock()
			defer mu.Unlock()
			waitsDone = append(waitsDone, w)
		},
		OnDone: func(_ *http.Request, o Outcome) {
			mu.Lock()
			defer mu.Unlock()
			dones = append(dones, o)
		},
	}

	ctx := context.Background()
	var callerDeadline time.Time
	if sc.callerDeadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clockwork.WithTimeout(ctx, fc, sc.callerDeadline)
		defer cancel()
		callerDeadline = fc.Now().Add(sc.callerDeadline)
	}
	var o Outcome
	ctx = WithOutcome(ctx, &o)
	const payload = `{"sku":"b1","qty":2}`
	method := strings.TrimSuffix(sc.method, "+key")
	var body io.Reader
	if method != "GET" {
		body = strings.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://api.test/orders?token=t0k3n", body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(sc.method, "+key") {
		req.Header.Set(IdempotencyKeyHeader, "fz-key-1")
	}
	keyless := sc.method == "POST"
	// bufFails reports an attempt whose response BufferResponse reads in
	// full, and whose body resets before its declared length, or, when
	// that is 0, where its EOF (and its trailers) should be: the
	// Transport makes that attempt an error.
	bufFails := func(c *fzCall) bool {
		return c.resp != nil && sc.bufferResponse > 0 && !keyless && c.step.fails &&
			int64(c.step.size) <= sc.bufferResponse
	}

	t0 := fc.Now()
	deadline, hasDeadline := callerDeadline, !callerDeadline.IsZero()
	if sc.timeout > 0 && (!hasDeadline || t0.Add(sc.timeout).Before(deadline)) {
		deadline, hasDeadline = t0.Add(sc.timeout), true
	}
	minAttempt := durationOr(sc.minAttempt, DefaultMinAttemptTime)

	ch := start(tr, req)
	var res result
	waited := make(map[int]time.Duration) // by attempt number
driver:
	for {
		select {
		case w := <-waitc:
			bctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := fc.BlockUntilContext(bctx, w.waiters+1)
			cancel()
			if err != nil {
				t.Fatalf("the wait of %v never registered its timer (%d waiters before it)", w.d, w.waiters)
			}
			waited[w.number] = w.d
			fc.Advance(w.d)
		case res = <-ch:
			break driver
		case <-time.After(5 * time.Second):
			t.Fatalf("RoundTrip did not return; scenario %+v", sc)
		}
	}
	end := fc.Now()
	calls := base.snapshot()
	desc := fzDescribe(sc, calls, attempts, o)

	// Attempts.
	if len(calls) > sc.maxAttempts || len(calls) != o.Attempts || len(attempts) != o.Attempts || o.Attempts < 1 {
		t.Fatalf("Base saw %d attempts, OnAttempt %d, Outcome %d; want equal, 1 to MaxAttempts %d\n%s",
			len(calls), len(attempts), o.Attempts, sc.maxAttempts, desc)
	}
	// Time: no retry with less than MinAttemptTime left, no attempt past
	// its limit, nothing past the deadline.
	for k, c := range calls {
		if k > 0 && hasDeadline && deadline.Sub(c.start) < minAttempt {
			t.Errorf("attempt %d started with %v left; MinAttemptTime is %v\n%s", k+1, deadline.Sub(c.start), minAttempt, desc)
		}
		if sc.attemptTimeout > 0 && c.end.Sub(c.start) > sc.attemptTimeout {
			t.Errorf("attempt %d took %v; AttemptTimeout is %v\n%s", k+1, c.end.Sub(c.start), sc.attemptTimeout, desc)
		}
		if hasDeadline && c.end.After(deadline) {
			t.Errorf("attempt %d ended %v after the deadline\n%s", k+1, c.end.Sub(deadline), desc)
		}
	}
	if last := calls[len(calls)-1]; !end.Equal(last.end) {
		t.Errorf("RoundTrip returned %v after its last attempt ended; nothing is waited after the last attempt\n%s", end.Sub(last.end), desc)
	}
	if hasDeadline && end.After(deadline) {
		t.Errorf("RoundTrip returned %v after the deadline\n%s", end.Sub(deadline), desc)
	}
	if o.Elapsed != end.Sub(t0) {
		t.Errorf("Outcome.Elapsed %v; the fake clock moved %v\n%s", o.Elapsed, end.Sub(t0), desc)
	}
	// Retry-After is a minimum.
	for k := 0; k+1 < len(calls); k++ {
		c := calls[k]
		if c.resp == nil || bufFails(c) || !rulesHonoursRetryAfter(c.resp.StatusCode) || !c.step.ra.ok {
			continue
		}
		if gap := calls[k+1].start.Sub(c.end); gap < c.step.ra.delay || attempts[k].Wait < c.step.ra.delay {
			t.Errorf("attempt %d followed a Retry-After of %v after %v (Wait %v)\n%s", k+2, c.step.ra.delay, gap, attempts[k].Wait, desc)
		}
	}
	// Only a dial error, or the server's explicit word on an error
	// response, lets a POST without a key go again.
	for k := 1; keyless && k < len(calls); k++ {
		if prev := calls[k-1]; !prev.dialError() && !(prev.resp != nil && !bufFails(prev) && rulesVouches(prev.resp.StatusCode, prev.resp.Header)) {
			t.Errorf("POST without a key sent again (attempt %d) after %v\n%s", k+1, fzWhat(prev), desc)
		}
	}
	// Every attempt sent the whole body and the caller's key.
	for k, c := range calls {
		if body != nil && c.reqBody != payload {
			t.Errorf("attempt %d sent body %q; want %q\n%s", k+1, c.reqBody, payload, desc)
		}
		if want := strings.HasSuffix(sc.method, "+key"); c.hasKey != want || (want && c.key != "fz-key-1") {
			t.Errorf("attempt %d key %q (present %v)\n%s", k+1, c.key, c.hasKey, desc)
		}
	}

	// Each attempt ran under the smaller of AttemptTimeout and the time
	// left, and the stop rules, applied in docs/rules.md's order to what each
	// attempt met, give the same waits and the same reason.
	for k, c := range calls {
		want, ok := deadline, hasDeadline
		if sc.attemptTimeout > 0 && (!ok || c.start.Add(sc.attemptTimeout).Before(want)) {
			want, ok = c.start.Add(sc.attemptTimeout), true
		}
		if !ok {
			want = time.Time{}
		}
		if !c.deadline.Equal(want) {
			t.Errorf("attempt %d ran with deadline +%v; want +%v\n%s", k+1, c.deadline.Sub(t0), want.Sub(t0), desc)
		}
	}
	fzCheckRules(t, fzRules{sc: sc, calls: calls, attempts: attempts, o: o, deadline: deadline, hasDeadline: hasDeadline,
		callerDeadline: callerDeadline, minAttempt: minAttempt, keyless: keyless, bufFails: bufFails}, desc)

	// Hooks, WithOutcome and the error agree.
	if len(dones) != 1 || dones[0] != o {
		t.Errorf("OnDone %+v; want once with %+v\n%s", dones, o, desc)
	}
	var sumWait time.Duration
	for k, a := range attempts {
		c := calls[k]
		status := 0
		if c.resp != nil {
			status = c.resp.StatusCode
		}
		if a.Number != k+1 || a.Duration != c.end.Sub(c.start) || (a.Err == nil) != (c.err == nil && !bufFails(c)) {
			t.Errorf("attempt %d reported %+v; Base saw %s in %v\n%s", k+1, a, fzWhat(c), c.end.Sub(c.start), desc)
		}
		if a.Err == nil && a.Status != status {
			t.Errorf("attempt %d reported status %d; Base answered %d\n%s", k+1, a.Status, status, desc)
		}
		if a.Wait != waited[a.Number] {
			t.Errorf("attempt %d announced a wait of %v; the driver advanced %v\n%s", k+1, a.Wait, waited[a.Number], desc)
		}
		// Draining takes no fake time: the next attempt starts exactly
		// after the announced wait.
		if k+1 < len(calls) && calls[k+1].start != c.end.Add(a.Wait) {
			t.Errorf("attempt %d started %v after attempt %d; its wait was %v\n%s", k+2, calls[k+1].start.Sub(c.end), k+1, a.Wait, desc)
		}
		sumWait += a.Wait
	}
	if last := attempts[len(attempts)-1]; last.Wait != 0 || last.Status != o.Status {
		t.Errorf("last attempt %+v; want no wait and the Outcome's status %d\n%s", last, o.Status, desc)
	}
	if sumWait != o.Waited {
		t.Errorf("waits add up to %v; Outcome.Waited %v\n%s", sumWait, o.Waited, desc)
	}
	// OnWait: once per wait, after each attempt but the last, for the
	// whole wait (the driver lets every wait run its course), its server
	// part within the wait.
	if len(waitsDone) != len(attempts)-1 {
		t.Errorf("OnWait ran %d times for %d attempts; want once between two attempts\n%s", len(waitsDone), len(attempts), desc)
	}
	for k, w := range waitsDone {
		if k >= len(attempts) {
			break
		}
		a := attempts[k]
		if w.After != a.Number || w.Waited != a.Wait || w.RetryAfter != min(a.RetryAfter, a.Wait) {
			t.Errorf("OnWait %+v after attempt %d, which announced a wait of %v (server %v)\n%s", w, a.Number, a.Wait, a.RetryAfter, desc)
		}
	}
	if got, want := strings.Count(logs.String(), "\n"), o.Attempts-1+btoi(o.Reason != Final); got != want {
		t.Errorf("%d log records; want one per retry and one for a %s stop: %d\n%s\n%s", got, o.Reason, want, logs.String(), desc)
	}
	if strings.Contains(logs.String(), "t0k3n") {
		t.Errorf("the query token reached the log\n%s", desc)
	}

	// The result: the last response, unread, and every other closed.
	last := calls[len(calls)-1]
	if res.err != nil {
		var e *Error
		if !errors.As(res.err, &e) || e.Outcome != o || res.resp != nil {
			t.Fatalf("RoundTrip = %v, %v; want a *Error carrying %+v\n%s", res.resp, res.err, o, desc)
		}
		unknown := keyless && last.err != nil && !last.dialError()
		if got := errors.Is(res.err, ErrOutcomeUnknown); got != unknown {
			t.Errorf("errors.Is(err, ErrOutcomeUnknown) = %v; want %v\n%s", got, unknown, desc)
		}
	} else if res.resp == nil || res.resp != last.resp {
		t.Fatalf("RoundTrip returned %p; the last response from Base was %p\n%s", res.resp, last.resp, desc)
	}
	for k, c := range calls {
		if c.body == nil || (res.resp != nil && k == len(calls)-1) {
			continue
		}
		if _, closed := c.body.state(); !closed {
			t.Errorf("the body of attempt %d was not closed\n%s", k+1, desc)
		}
	}
	if res.resp != nil {
		read, closed := last.body.state()
		buffered := sc.bufferResponse > 0 && !keyless && int64(last.step.size) <= sc.bufferResponse
		if !buffered && (read != 0 || closed) {
			t.Errorf("the returned body was read (%d bytes) or closed (%v) before the caller got it\n%s", read, closed, desc)
		}
		got, err := io.ReadAll(res.resp.Body)
		res.resp.Body.Close()
		want := last.body.data
		if last.step.fails && !buffered {
			want = want[:len(want)/2]
		}
		if !bytes.Equal(got, want) || (err != nil) != (last.step.fails && !buffered) {
			t.Errorf("the caller read %q, %v; want %q\n%s", got, err, want, desc)
		}
		if _, closed := last.body.state(); !closed {
			t.Errorf("closing the returned body did not close Base's\n%s", desc)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fzWhat describes what one attempt met.
func fzWhat(c *fzCall) string {
	if c.timedOut {
		return "a timeout: " + c.err.Error()
	}
	if c.err != nil {
		return "error " + c.err.Error()
	}
	return fmt.Sprintf("status %d (Retry-After %q, should-retry %v, %d-byte body, fails %v)", c.resp.StatusCode,
		c.resp.Header.Get("Retry-After"), fzShouldRetry[c.step.should].h, c.step.size, c.step.fails)
}

// fzDescribe renders a scenario and what happened, for failure messages.
func fzDescribe(sc fzScenario, calls []*fzCall, attempts []Attempt, o Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy: %s MaxAttempts %d Timeout %v caller deadline %v AttemptTimeout %v MinAttemptTime %v BaseDelay %v MaxDelay %v MaxRetryAfter %v jitter %d/4 budget %d BufferResponse %d\n",
		sc.method, sc.maxAttempts, sc.timeout, sc.callerDeadline, sc.attemptTimeout, sc.minAttempt, sc.baseDelay,
		sc.maxDelay, sc.maxRetryAfter, sc.jitterQuarters, sc.budget, sc.bufferResponse)
	for k, c := range calls {
		fmt.Fprintf(&b, "  attempt %d at +%v for %v: %s", k+1, c.start.Sub(calls[0].start), c.end.Sub(c.start), fzWhat(c))
		if k < len(attempts) {
			fmt.Fprintf(&b, "; reported %+v", attempts[k])
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "outcome: %+v", o)
	return b.String()
}
