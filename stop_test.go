package httpretry

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// refusingBudget is an empty Budget that counts what it was asked.
type refusingBudget struct{ withdraws, refunds atomic.Int32 }

func (*refusingBudget) Deposit()                        {}
func (b *refusingBudget) Withdraw(context.Context) bool { b.withdraws.Add(1); return false }
func (b *refusingBudget) Refund()                       { b.refunds.Add(1) }

// TestStopOrder checks through RoundTrip which reason wins when several
// hold, one case per reason in the order of StopReasons: each makes its
// reason hold together with the later ones a Transport can meet at the
// same time, always with an empty budget, which is asked only when every
// other rule allowed the retry.
func TestStopOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		method       string
		step         httptestutil.Step
		max          int
		timeout      time.Duration
		retryAfter   time.Duration // MaxRetryAfter
		cancel       bool          // the caller cancels while the response is on its way
		getBodyFails bool          // the request has a body whose GetBody fails
		want         StopReason
	}{
		{name: "canceled: a transient response after the caller left, before everything", method: "POST",
			step: httptestutil.Step{Status: 503, RetryAfter: "3600"}, max: 1, timeout: time.Second, cancel: true, getBodyFails: true,
			want: Canceled},
		{name: "final: not transient, before everything else", method: "POST", step: httptestutil.Step{Status: 404},
			max: 1, timeout: time.Second, getBodyFails: true, want: Final},
		{name: "attempts_exhausted before not_idempotent", method: "POST", step: httptestutil.Step{Status: 503, RetryAfter: "3600"},
			max: 1, timeout: time.Second, getBodyFails: true, want: AttemptsExhausted},
		{name: "not_idempotent before body_not_rewindable", method: "POST", step: httptestutil.Step{Status: 503, RetryAfter: "3600"},
			max: 3, timeout: time.Second, getBodyFails: true, want: NotIdempotent},
		{name: "body_not_rewindable (GetBody fails) before retry_after_exceeds_deadline", method: "PUT",
			step: httptestutil.Step{Status: 503, RetryAfter: "3600"}, max: 3, timeout: time.Second, retryAfter: time.Second, getBodyFails: true,
			want: BodyNotRewindable},
		{name: "retry_after_exceeds_deadline before retry_after_too_long", method: "GET", step: httptestutil.Step{Status: 503, RetryAfter: "60"},
			max: 3, timeout: time.Second, retryAfter: time.Second, want: RetryAfterExceedsDeadline},
		{name: "retry_after_too_long before budget_exhausted", method: "GET", step: httptestutil.Step{Status: 429, RetryAfter: "60"},
			max: 3, retryAfter: time.Second, want: RetryAfterTooLong},
		{name: "deadline_exhausted before budget_exhausted", method: "GET", step: httptestutil.Step{Status: 503},
			max: 3, timeout: 150 * ms, want: DeadlineExhausted},
		{name: "budget_exhausted last", method: "GET", step: httptestutil.Step{Status: 503},
			max: 3, timeout: time.Second, want: BudgetExhausted},
	}
	var wants []StopReason
	for _, tt := range tests {
		wants = append(wants, tt.want)
	}
	// throttled is decided before the first attempt, not after one: its
	// order is TestThrottledBeforeEverything's.
	if after := StopReasons()[1:]; !slices.Equal(wants, after) {
		t.Fatalf("the cases cover %v; want one per reason of StopReasons after throttled, in its order: %v", wants, after)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			steps := httptestutil.NewTransport(fc, tt.step)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := steps.RoundTrip(r)
				if tt.cancel {
					cancel() // the response is on its way
				}
				return resp, err
			})
			budget := &refusingBudget{}
			tr := &Transport{Base: base, Clock: fc, MaxAttempts: tt.max, Timeout: tt.timeout,
				MaxRetryAfter: tt.retryAfter, Budget: budget, Jitter: waits(100 * ms)}
			var o Outcome
			var body io.Reader
			if tt.getBodyFails {
				body = strings.NewReader("{}")
			}
			req := newRequest(t, WithOutcome(ctx, &o), tt.method, "http://api.test/", body)
			if tt.getBodyFails {
				req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("the body is gone") }
			}
			r := await(t, start(tr, req))
			if r.err != nil {
				t.Fatalf("RoundTrip error: %v", r.err)
			}
			// The body is the fake server's; once the caller has left,
			// reading it may fail, which is not this test's concern.
			r.resp.Body.Close()
			if o.Reason != tt.want || o.Attempts != 1 {
				t.Errorf("outcome = %+v; want %s after 1 attempt", o, tt.want)
			}
			wantWithdraws := int32(0)
			if tt.want == BudgetExhausted {
				wantWithdraws = 1
			}
			if got := budget.withdraws.Load(); got != wantWithdraws {
				t.Errorf("the budget was asked %d times; want %d", got, wantWithdraws)
			}
			if got := budget.refunds.Load(); got != 0 {
				t.Errorf("the budget was refunded %d times; nothing was withdrawn", got)
			}
		})
	}
}

func TestBudgetAcrossOperations(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	// One token and no replenishment: the first operation retries once,
	// every later one stops after its first attempt.
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 3, Budget: NewTokenBucket(1, 0), Jitter: noJitter}
	var reasons []StopReason
	for range 3 {
		var o Outcome
		r := await(t, start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatal(r.err)
		}
		readBody(t, r.resp)
		reasons = append(reasons, o.Reason)
	}
	want := []StopReason{BudgetExhausted, BudgetExhausted, BudgetExhausted}
	for i := range want {
		if reasons[i] != want[i] {
			t.Errorf("operation %d stopped with %s; want %s", i+1, reasons[i], want[i])
		}
	}
	if got := base.Hits(); got != 4 {
		t.Errorf("hits = %d; want 4 (2 + 1 + 1)", got)
	}
}

func TestDefaultBudgetIsPrivateAndLimits(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Jitter: noJitter}
	// NewTokenBucket(20, 0.1): 30 failing operations deposit 3 tokens, but the
	// first deposit finds the bucket full and is lost (bucket overflow can
	// make the actual number smaller): 20 + floor(2.9).
	retried := 0
	for range 30 {
		var o Outcome
		r := await(t, start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)))
		if r.err != nil {
			t.Fatal(r.err)
		}
		readBody(t, r.resp)
		if o.Attempts == 2 {
			retried++
		}
	}
	if retried != 22 {
		t.Errorf("operations retried = %d; want 22", retried)
	}
	other := &Transport{}
	if tr.budget() == other.budget() {
		t.Error("two Transports share a default budget")
	}
}

func TestFirstAttemptAlwaysRuns(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	ctx, cancel := clockwork.WithTimeout(context.Background(), fc, ms) // far less than MinAttemptTime
	defer cancel()
	tr := &Transport{Base: base, Clock: fc}
	var o Outcome
	r := await(t, start(tr, newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if base.Hits() != 1 || o.Reason != DeadlineExhausted {
		t.Errorf("hits %d, outcome %+v; want 1 attempt then deadline_exhausted", base.Hits(), o)
	}
}

func TestCallerDeadlineBoundsOperation(t *testing.T) {
	t.Parallel()
	// The caller's deadline (400 ms) is earlier than Timeout (10 s): it is
	// the one that counts, and attempts get only what is left of it.
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
	ctx, cancel := clockwork.WithTimeout(context.Background(), fc, 400*ms)
	defer cancel()
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, Timeout: 10 * time.Second, AttemptTimeout: 250 * ms,
		Jitter: waits(20 * ms), OnAttempt: log.onAttempt}
	ch := start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))
	advanceAt(t, fc, base, 1, 3, 250*ms) // caller ctx, operation ctx, attempt ctx
	advance(t, fc, 3, 20*ms)             // the wait; attempt 2 then has 130 ms
	advanceAt(t, fc, base, 2, 3, 130*ms)
	r := await(t, ch)
	var e *Error
	if !errors.As(r.err, &e) {
		t.Fatalf("err = %v; want *Error", r.err)
	}
	if e.Reason != Canceled || e.Elapsed != 400*ms || !errors.Is(r.err, context.DeadlineExceeded) || !e.Timeout() {
		t.Errorf("outcome = %+v; want canceled by the caller's deadline at 400ms", e.Outcome)
	}
	if len(log.attempts) != 2 || log.attempts[1].Duration != 130*ms {
		t.Errorf("attempts = %+v; want the second bounded to 130ms", log.attempts)
	}
}

func TestCancelDuringWait(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503, Body: "busy"})
	ctx, cancel := context.WithCancel(context.Background())
	budget := NewTokenBucket(2, 0)
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(time.Second), Budget: budget}
	ch := start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))
	awaitWaiters(t, fc, 1)
	cancel()
	r := await(t, ch)
	var e *Error
	if !errors.As(r.err, &e) {
		t.Fatalf("err = %v; want *Error", r.err)
	}
	if e.Reason != Canceled || e.Attempts != 1 || e.Status != 503 || !errors.Is(r.err, context.Canceled) {
		t.Errorf("outcome = %+v; want canceled after the 503", e.Outcome)
	}
	if e.Timeout() {
		t.Error("a cancellation is not a timeout")
	}
	if !base.BodyClosed(0) || base.BodyRead(0) != 4 {
		t.Errorf("the 503 was not drained (read %d) and closed (%v) before the wait", base.BodyRead(0), base.BodyClosed(0))
	}
	if base.Hits() != 1 {
		t.Errorf("hits = %d; want 1", base.Hits())
	}
	if budget.Tokens() != 2 {
		t.Errorf("tokens = %v; the retry never started, so its token comes back", budget.Tokens())
	}
}

func TestCancelDuringAttempt(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
	ctx, cancel := context.WithCancel(context.Background())
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 5}
	ch := start(tr, newRequest(t, ctx, "GET", "http://api.test/", nil))
	// Cancel once the attempt has reached the server, not before.
	pollUntil(t, "the attempt to reach the server", func() bool { return base.Hits() > 0 })
	cancel()
	r := await(t, ch)
	var e *Error
	if !errors.As(r.err, &e) || e.Reason != Canceled || e.Attempts != 1 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v; want canceled after 1 attempt", r.err)
	}
	if base.Hits() != 1 {
		t.Errorf("hits = %d; want 1", base.Hits())
	}
}

func TestNotTransientIsFinal(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 404, Body: "nope"})
	tr := &Transport{Base: base, Clock: fc}
	var o Outcome
	r := await(t, start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil)))
	if r.err != nil || r.resp.StatusCode != http.StatusNotFound {
		t.Fatalf("got %v, %v; want the 404", r.resp, r.err)
	}
	if got := readBody(t, r.resp); got != "nope" {
		t.Errorf("body = %q", got)
	}
	if o.Reason != Final || o.Attempts != 1 {
		t.Errorf("outcome = %+v; want final after 1 attempt", o)
	}
}

func TestCustomTransientAndIdempotent(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 418}, httptestutil.Step{Status: 200})
	var sawStatus []int
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter,
		Transient: func(resp *http.Response, err error) bool {
			sawStatus = append(sawStatus, resp.StatusCode)
			return resp.StatusCode == 418
		},
		Idempotent: func(*http.Request) bool { return true },
	}
	r := await(t, start(tr, newRequest(t, context.Background(), "POST", "http://api.test/", nil)))
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want 200 after retrying the 418", r.resp, r.err)
	}
	readBody(t, r.resp)
	if len(sawStatus) != 2 || base.Hits() != 2 {
		t.Errorf("Transient saw %v, hits %d; want 2 each", sawStatus, base.Hits())
	}
}

func TestResponseAfterCallerLeft(t *testing.T) {
	t.Parallel()
	// The caller cancels while the 503 is on its way: the 503 is returned,
	// nothing more is sent and no wait is announced.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		cancel()
		return response(r, 503, "busy"), nil
	})
	var log attemptLog
	budget := NewTokenBucket(5, 0)
	tr := &Transport{Base: base, Jitter: waits(time.Second), OnAttempt: log.onAttempt, Budget: budget}
	defer func() {
		if budget.Tokens() != 5 {
			t.Errorf("tokens = %v; the retry was never sent, so its token comes back", budget.Tokens())
		}
	}()
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the 503", resp, err)
	}
	if got := readBody(t, resp); got != "busy" {
		t.Errorf("body = %q; want it unread until now", got)
	}
	if o.Reason != Canceled || o.Attempts != 1 || len(log.attempts) != 1 || log.attempts[0].Wait != 0 {
		t.Errorf("outcome %+v, attempts %+v; want canceled after 1 attempt with no wait", o, log.attempts)
	}
}

// TestStopReasonsDocumented: docs/rules.md's "Stop reasons" table and the
// constants' declaration list exactly the reasons of StopReasons, in its
// order, which is the order the Transport checks them (TestNextStopOrder,
// TestStopOrder).
func TestStopReasonsDocumented(t *testing.T) {
	t.Parallel()
	want := StopReasons()
	if got := rulesStopTable(t); !slices.Equal(got, want) {
		t.Errorf("docs/rules.md's \"Stop reasons\" table lists %v; want StopReasons, %v", got, want)
	}
	if got := readmeBriefStops(t); !slices.Equal(got, want) {
		t.Errorf("README.md's rules in brief list %v; want StopReasons, %v", got, want)
	}
	if got := declaredStopReasons(t); !slices.Equal(got, want) {
		t.Errorf("stop.go declares %v; want StopReasons, %v", got, want)
	}
}

// rulesDoc is the page that states the rules in full: the fields table,
// the "Stop reasons" table and how the server's delay is read.
const rulesDoc = "docs/rules.md"

// rulesStopTable returns the reasons of docs/rules.md's "Stop reasons"
// table, row by row: the first cell of each row, a backquoted word.
func rulesStopTable(t *testing.T) []StopReason {
	t.Helper()
	doc, err := os.ReadFile(rulesDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Stop reasons\n")
	if !ok {
		t.Fatal(`docs/rules.md has no "## Stop reasons" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var reasons []StopReason
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.TrimSpace(cells[0]) != "" {
			continue
		}
		cell := strings.TrimSpace(cells[1])
		if word, ok := strings.CutPrefix(cell, "`"); ok && strings.HasSuffix(word, "`") {
			reasons = append(reasons, StopReason(strings.TrimSuffix(word, "`")))
		}
	}
	return reasons
}

// readmeBriefStops returns the reasons the README's "The rules in brief"
// lists, in its order: the backquoted words from "the first that holds:" to
// the reference to StopReasons.
func readmeBriefStops(t *testing.T) []StopReason {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(readme), "first that holds:")
	list, _, ok2 := strings.Cut(list, "(`httpretry.StopReasons()`")
	if !ok || !ok2 {
		t.Fatal("README.md: the rules in brief no longer list the stop reasons")
	}
	var reasons []StopReason
	for _, word := range strings.Split(list, "`")[1:] {
		if word = strings.TrimSpace(word); word != "" && !strings.ContainsAny(word, ", ") {
			reasons = append(reasons, StopReason(word))
		}
	}
	return reasons
}

// declaredStopReasons returns the values of the StopReason constants of
// stop.go, in the order they are declared.
func declaredStopReasons(t *testing.T) []StopReason {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "stop.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []StopReason
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "StopReason" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("a StopReason constant's value is %T; want a string literal", v)
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				reasons = append(reasons, StopReason(s))
			}
		}
	}
	return reasons
}

// TestEffectiveBudgetIsTheDefaultInUse: without a Budget, EffectiveBudget
// returns the default budget the Transport's operations draw on, the same
// one every time; with one, that one.
func TestEffectiveBudgetIsTheDefaultInUse(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Jitter: noJitter}
	b, ok := tr.EffectiveBudget().(*TokenBucket)
	if !ok || b.Tokens() != 20 {
		t.Fatalf("EffectiveBudget() = %#v; want the default bucket of 20 tokens", tr.EffectiveBudget())
	}
	r := await(t, start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	// The operation deposited into a full bucket (lost) and withdrew one
	// token for its retry.
	if got := b.Tokens(); got != 19 {
		t.Errorf("tokens after one retry = %v; want 19", got)
	}
	if tr.EffectiveBudget() != Budget(b) {
		t.Error("EffectiveBudget returned a different budget the second time")
	}
	own := NewTokenBucket(5, 0)
	if got := (&Transport{Budget: own}).EffectiveBudget(); got != Budget(own) {
		t.Errorf("EffectiveBudget() = %v; want the Transport's own Budget", got)
	}
}
