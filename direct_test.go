package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/tried"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestDirectIsEverySettingThatLeavesTheFirstAttemptAsItIs: each field of
// Transport, set, either leaves the first attempt as it is (it acts only
// on retries, waits or the budget) or makes the Transport prepare it. A
// field added to Transport must be sorted here.
func TestDirectIsEverySettingThatLeavesTheFirstAttemptAsItIs(t *testing.T) {
	t.Parallel()
	leaves := map[string]bool{
		"Base": true, "MaxAttempts": true, "MinAttemptTime": true, "BaseDelay": true,
		"MaxDelay": true, "MaxRetryAfter": true, "BufferRequest": true,
		"NewIdempotencyKey": true, "Budget": true, "BudgetPerHost": true, "Jitter": true,
		"Clock": true, "Logger": true, "LogRoute": true, "DialTrace": true, "OnWait": true,
		// Its destination's state is looked up for each request: only
		// one that is not idle takes the operation's admission.
		"Throttle": true,
		// The first attempt gets a context of its own and the hedge
		// timer, on the caller's goroutine (firstAttempt.sendHedged).
		"Hedging": true,
	}
	prepares := map[string]bool{
		"Timeout": true, "AttemptTimeout": true, "BufferResponse": true, "IdleTimeout": true,
		"Transient": true, "Idempotent": true, "OnAttempt": true, "OnAttemptStart": true,
		"OnDone": true, "Propagate": true, "LearnAttemptTimeout": true,
	}
	if !(&Transport{}).direct() {
		t.Fatal("the zero Transport is not direct")
	}
	typ := reflect.TypeFor[Transport]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		var tr Transport
		setNonZero(t, reflect.ValueOf(&tr).Elem().Field(i))
		got := tr.direct()
		switch {
		case leaves[f.Name]:
			if !got {
				t.Errorf("%s set: direct() = false; it does not act on the first attempt", f.Name)
			}
		case prepares[f.Name]:
			if got {
				t.Errorf("%s set: direct() = true; it acts on the first attempt", f.Name)
			}
		default:
			t.Errorf("field %s is not sorted: does it act on the first attempt?", f.Name)
		}
	}
}

// setNonZero sets v, a field of Transport, to a value that is not its
// zero value.
func setNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(time.Second))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { panic("not called") }))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Interface:
		switch v.Type() {
		case reflect.TypeFor[http.RoundTripper]():
			v.Set(reflect.ValueOf(newStaticBase()))
		case reflect.TypeFor[Budget]():
			v.Set(reflect.ValueOf(NewTokenBucket(1, 1)))
		case reflect.TypeFor[clockwork.Clock]():
			v.Set(reflect.ValueOf(clockwork.NewFakeClock()))
		default:
			t.Fatalf("no value for %v", v.Type())
		}
	default:
		t.Fatalf("no value for %v", v.Type())
	}
}

// TestSendsDirectOnlyARequestThatNeedsNothingPrepared: a request is sent
// as it is only when nothing of the operation must be around its first
// attempt: no body, safe to repeat, no deadline, no Outcome, no tried
// set, and a Base that needs no ownership mark when retries may follow.
func TestSendsDirectOnlyARequestThatNeedsNothingPrepared(t *testing.T) {
	t.Parallel()
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	httpT, other := http.RoundTripper(&http.Transport{}), http.RoundTripper(newStaticBase())
	cases := []struct {
		name    string
		method  string
		body    io.Reader
		header  string
		ctx     context.Context
		base    http.RoundTripper
		retries bool
		want    bool
	}{
		{"GET to an http.Transport", "GET", nil, "", context.Background(), httpT, true, true},
		{"PUT without a body", "PUT", nil, "", context.Background(), httpT, true, true},
		{"PUT with a body", "PUT", strings.NewReader("x"), "", context.Background(), httpT, true, false},
		{"POST", "POST", nil, "", context.Background(), httpT, true, false},
		{"POST with an idempotency key", "POST", nil, IdempotencyKeyHeader, context.Background(), httpT, true, true},
		{"POST marked idempotent", "POST", nil, "", WithIdempotent(context.Background()), httpT, true, true},
		{"a caller's deadline", "GET", nil, "", deadline, httpT, true, false},
		{"an Outcome asked for", "GET", nil, "", WithOutcome(context.Background(), new(Outcome)), httpT, true, false},
		{"an outer operation's tried set", "GET", nil, "", tried.With(context.Background()), httpT, true, false},
		{"another Base, retries may follow", "GET", nil, "", context.Background(), other, true, false},
		{"another Base, one attempt", "GET", nil, "", context.Background(), other, false, true},
	}
	for _, c := range cases {
		req, err := http.NewRequestWithContext(c.ctx, c.method, "http://api.test/", c.body)
		if err != nil {
			t.Fatal(err)
		}
		if c.header != "" {
			req.Header.Set(c.header, "k1")
		}
		if got := sendsDirect(req, c.ctx, c.base, c.retries); got != c.want {
			t.Errorf("%s: sendsDirect = %v, want %v", c.name, got, c.want)
		}
	}
}

// countBudget counts the calls of a Budget and always grants a retry.
type countBudget struct{ deposits, withdrawals, refunds atomic.Int64 }

func (b *countBudget) Deposit()                      { b.deposits.Add(1) }
func (b *countBudget) Withdraw(context.Context) bool { b.withdrawals.Add(1); return true }
func (b *countBudget) Refund()                       { b.refunds.Add(1) }

// TestDirectFirstAttemptIsTheOperationsFirst: a first attempt sent as it
// is counts as the operation's first: an answer Transient calls final is
// returned as Base gave it; a transient one or an error is retried by the
// loop as attempt 1 of MaxAttempts; the budget gets one deposit per
// operation either way, and none under an outer layer that owns retries.
func TestDirectFirstAttemptIsTheOperationsFirst(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name         string
		answers      []int // 0 for the refused dial
		owned        bool
		wantCalls    int
		wantStatus   int
		wantDeposit  int64
		wantWithdraw int64
	}{
		{"final 200", []int{200}, false, 1, 200, 1, 0},
		{"final 404", []int{404}, false, 1, 404, 1, 0},
		{"503, then 200", []int{503, 200}, false, 2, 200, 1, 1},
		{"refused, then 200", []int{0, 200}, false, 2, 200, 1, 1},
		{"503 three times", []int{503, 503, 503}, false, 3, 503, 1, 2},
		{"503 under an owner", []int{503, 200}, true, 1, 503, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			base := &http.Transport{}
			base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
				n := calls.Add(1)
				status := c.answers[min(int(n), len(c.answers))-1]
				if status == 0 {
					return nil, refused
				}
				return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
			}))
			budget := &countBudget{}
			var waits atomic.Int64
			tr := &Transport{Base: base, Budget: budget, MaxAttempts: 3, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond,
				Logger: slog.New(slog.DiscardHandler), OnWait: func(*http.Request, Wait) { waits.Add(1) }}
			if !tr.direct() {
				t.Fatal("the Transport is not direct")
			}
			ctx := context.Background()
			if c.owned {
				ctx = withRetriesOwned(ctx)
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", "mem://api.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != c.wantStatus || string(b) != "ok" {
				t.Errorf("answer %d %q, want %d \"ok\"", resp.StatusCode, b, c.wantStatus)
			}
			if got := calls.Load(); got != int64(c.wantCalls) {
				t.Errorf("Base called %d times, want %d", got, c.wantCalls)
			}
			if got := waits.Load(); got != int64(c.wantCalls-1) {
				t.Errorf("OnWait called %d times, want %d", got, c.wantCalls-1)
			}
			if d, w := budget.deposits.Load(), budget.withdrawals.Load(); d != c.wantDeposit || w != c.wantWithdraw {
				t.Errorf("budget: %d deposits, %d withdrawals; want %d, %d", d, w, c.wantDeposit, c.wantWithdraw)
			}
		})
	}
}

// TestDirectFirstErrorIsReportedAsTheLoopsWouldBe: a first attempt sent
// as it is that fails, when no retry may follow, ends the operation with
// the *Error the loop gives: attempts_exhausted, one attempt, the dial's
// error in the chain, the outcome known (a refused dial sent nothing).
func TestDirectFirstErrorIsReportedAsTheLoopsWouldBe(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	base := &http.Transport{}
	var calls atomic.Int64
	base.RegisterProtocol("mem", roundTripFunc(func(*http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, refused
	}))
	tr := &Transport{Base: base, MaxAttempts: 1}
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	resp, err := tr.RoundTrip(req)
	var e *Error
	if resp != nil || !errors.As(err, &e) {
		t.Fatalf("RoundTrip = %v, %v; want an *Error", resp, err)
	}
	if e.Outcome.Reason != AttemptsExhausted || e.Outcome.Attempts != 1 || e.Outcome.Unknown ||
		!errors.Is(err, syscall.ECONNREFUSED) || calls.Load() != 1 {
		t.Errorf("outcome %+v after %d calls; want attempts_exhausted after 1, known, with the dial's error", e.Outcome, calls.Load())
	}
}

// memBase returns an *http.Transport that answers "mem://" URLs with the
// statuses of answers in turn (the last one from then on), counting the
// requests it answered.
func memBase(calls *atomic.Int64, answers ...int) *http.Transport {
	base := &http.Transport{}
	base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		status := answers[min(int(n), len(answers))-1]
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}))
	return base
}

// TestDirectThrottleKeyRunsOncePerOperation: with a Throttle, a first
// attempt sent directly looks its destination up once, and the loop that
// takes a transient answer over uses that destination: Throttle.Key runs
// once per operation, however many attempts follow.
func TestDirectThrottleKeyRunsOncePerOperation(t *testing.T) {
	t.Parallel()
	var calls, keys atomic.Int64
	th := &throttle.Throttle{Key: func(*http.Request) string { keys.Add(1); return "api" }}
	tr := &Transport{Base: memBase(&calls, 503, 503, 200), Throttle: th, MaxAttempts: 3,
		BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond}
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip = %v, %v; want the third attempt's 200", resp, err)
	}
	resp.Body.Close()
	if calls.Load() != 3 || keys.Load() != 1 {
		t.Errorf("%d attempts, Throttle.Key called %d times; want 3 attempts, 1 call", calls.Load(), keys.Load())
	}
}

// TestDirectThrottleCountsEveryAnswer: a Throttle counts the answers of
// first attempts sent directly as it counts the loop's: 200 final answers
// are 200 requests and 200 accepts; then 503s, each a request and no
// accept, make the destination refuse, and a refused operation sends
// nothing.
func TestDirectThrottleCountsEveryAnswer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	status := atomic.Int64{}
	status.Store(200)
	base := &http.Transport{}
	base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		calls.Add(1)
		return &http.Response{StatusCode: int(status.Load()), Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}))
	th := drawing(&throttle.Throttle{Window: time.Hour, MinRate: -1}, func() float64 { return 0 })
	tr := &Transport{Base: base, Throttle: th, MaxAttempts: 1}
	send := func() error {
		req, _ := http.NewRequest("GET", "mem://api.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for range 200 {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	status.Store(503)
	var refused int
	for range 2000 {
		if errors.Is(send(), throttle.ErrThrottled) {
			refused++
		}
	}
	requests, accepts := throttleCounts(th, "api.test")
	if refused == 0 || calls.Load() != int64(2200-refused) {
		t.Errorf("%d refused, %d sent of 2,200; want some refused, and none of them sent", refused, calls.Load())
	}
	if accepts != 200 || requests <= 200 {
		t.Errorf("counted %v requests, %v accepts; want the 200 answered 200 as accepts, and the 503s as requests", requests, accepts)
	}
}

// hedgedMem returns a Transport hedging after delay over an
// *http.Transport that answers "mem://" URLs with answer, called with
// the attempt's number (1 for the first request Base sees).
func hedgedMem(delay time.Duration, answer func(n int64, req *http.Request) (*http.Response, error)) (*Transport, *atomic.Int64) {
	var calls atomic.Int64
	base := &http.Transport{}
	base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return answer(calls.Add(1), req)
	}))
	return &Transport{Base: base, Hedging: &Hedging{Delay: delay}, MaxAttempts: 3,
		BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond}, &calls
}

func memAnswer(req *http.Request, status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
}

// TestDirectHedgedTransientFirstAnswerGoesToTheLoop: a hedged
// operation's first attempt, sent directly, whose answer comes before the
// hedge delay and is not final, is the loop's first attempt: the retry
// follows after the budget's withdrawal, no hedge is sent, and the 503
// teaches no latency. The delay is adaptive (its floor an hour), so that
// latencies are kept: the first operation, with none known, is not
// hedged; the second's 200, sent directly, and the third's 503 then 200
// follow, and the three 200s are the latencies learned.
func TestDirectHedgedTransientFirstAnswerGoesToTheLoop(t *testing.T) {
	t.Parallel()
	tr, calls := hedgedMem(0, func(n int64, req *http.Request) (*http.Response, error) {
		if n == 3 {
			return memAnswer(req, 503, "busy"), nil
		}
		return memAnswer(req, 200, "ok"), nil
	})
	tr.Hedging.MinSamples, tr.Hedging.MinDelay = 1, time.Hour
	budget := &countBudget{}
	tr.Budget = budget
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	for op := 1; op <= 3; op++ {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("operation %d: %v", op, err)
		}
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
			t.Errorf("operation %d: answer %d %q, want 200 \"ok\"", op, resp.StatusCode, b)
		}
		resp.Body.Close()
	}
	if calls.Load() != 4 {
		t.Errorf("Base called %d times, want 4: two 200s, then a 503 and its retry, no hedge", calls.Load())
	}
	if d, w := budget.deposits.Load(), budget.withdrawals.Load(); d != 3 || w != 1 {
		t.Errorf("budget: %d deposits, %d withdrawals; want 3 (one per operation), 1 (the retry)", d, w)
	}
	if n := tr.latencies().LookupHost(req).Held(); n != 3 {
		t.Errorf("%d latencies learned; want 3, the three 200s (a 503 is none)", n)
	}
}

// TestFixedHedgeDelayKeepsNoLatencies: with a fixed hedge delay and no
// LearnAttemptTimeout, latencies derive nothing, and none are kept, on
// the direct path or the loop's.
func TestFixedHedgeDelayKeepsNoLatencies(t *testing.T) {
	t.Parallel()
	tr, calls := hedgedMem(time.Hour, func(n int64, req *http.Request) (*http.Response, error) {
		if n == 2 {
			return memAnswer(req, 503, "busy"), nil
		}
		return memAnswer(req, 200, "ok"), nil
	})
	req := twoOperationsAnswered(t, tr, calls)
	if n := tr.latencies().LookupHost(req).Held(); n != 0 {
		t.Errorf("%d latencies kept; want none", n)
	}
}

// TestDirectHedgedBasePanicBeforeTheDelayEndsTheAttempt: a Base that
// panics on a hedged operation's first attempt, before the hedge delay,
// has its panic raised by RoundTrip, with the attempt's context ended and
// no hedge sent.
func TestDirectHedgedBasePanicBeforeTheDelayEndsTheAttempt(t *testing.T) {
	t.Parallel()
	var ctx context.Context
	tr, calls := hedgedMem(time.Hour, func(_ int64, req *http.Request) (*http.Response, error) {
		ctx = req.Context()
		panic("base broke")
	})
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	if p := panicOf(t, tr, req); p != "base broke" {
		t.Fatalf("RoundTrip raised %v; want Base's panic", p)
	}
	if calls.Load() != 1 || ctx.Err() == nil {
		t.Errorf("%d calls, the attempt's context ended: %v; want 1 call, an ended context", calls.Load(), ctx.Err())
	}
}

// TestDirectHedgedBasePanicAfterTheHedgeFiredEndsTheHedge: when the hedge
// fires while the first attempt, sent directly, is still in Base, and
// Base then panics on it, RoundTrip raises the panic after the hedge is
// canceled and its answer closed.
func TestDirectHedgedBasePanicAfterTheHedgeFiredEndsTheHedge(t *testing.T) {
	t.Parallel()
	hedgeSent := make(chan struct{})
	var hedgeBody atomic.Bool
	tr, calls := hedgedMem(time.Millisecond, func(n int64, req *http.Request) (*http.Response, error) {
		if n == 1 {
			<-hedgeSent
			panic("first broke")
		}
		close(hedgeSent)
		<-req.Context().Done() // the hedge runs until it is canceled
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req,
			Body: &closeMark{closed: &hedgeBody}}, nil
	})
	tr.MaxAttempts = 2 // the first and one hedge: no second hedge while the first hangs
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	if p := panicOf(t, tr, req); p != "first broke" {
		t.Fatalf("RoundTrip raised %v; want the first attempt's panic", p)
	}
	if calls.Load() != 2 || !hedgeBody.Load() {
		t.Errorf("%d calls, hedge's body closed: %v; want 2 calls, the hedge's answer closed", calls.Load(), hedgeBody.Load())
	}
}

// TestDirectHedgedLoopPanicAfterTheHedgeFiredEndsBothAttempts: a hook
// that panics on the loop the hedge's timer started (a Logger's handler,
// when the hedge is logged) is raised by RoundTrip once both attempts,
// the first one sent directly included, are ended.
func TestDirectHedgedLoopPanicAfterTheHedgeFiredEndsBothAttempts(t *testing.T) {
	t.Parallel()
	var ended atomic.Int64
	tr, calls := hedgedMem(time.Millisecond, func(_ int64, req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		ended.Add(1)
		return nil, req.Context().Err()
	})
	tr.Logger = slog.New(panickingHandler{})
	tr.MaxAttempts = 2
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	if p := panicOf(t, tr, req); p != "handler broke" {
		t.Fatalf("RoundTrip raised %v; want the Logger's panic", p)
	}
	if calls.Load() != 2 || ended.Load() != 2 {
		t.Errorf("%d attempts sent, %d ended; want both ended before RoundTrip raised", calls.Load(), ended.Load())
	}
}

// panickingHandler is a slog.Handler that panics on every record.
type panickingHandler struct{ slog.Handler }

func (panickingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickingHandler) Handle(context.Context, slog.Record) error { panic("handler broke") }

// closeMark is an empty response body that marks when it is closed.
type closeMark struct{ closed *atomic.Bool }

func (closeMark) Read([]byte) (int, error) { return 0, io.EOF }
func (c *closeMark) Close() error          { c.closed.Store(true); return nil }

// TestDirectHedgedWithoutADelayYetLearnsOnce: an operation that Hedging
// does not hedge yet (a learned delay without enough samples) is sent by
// the loop, which learns its latency; Hedging.Key names its request once.
func TestDirectHedgedWithoutADelayYetLearnsOnce(t *testing.T) {
	t.Parallel()
	tr, calls := hedgedMem(0, func(_ int64, req *http.Request) (*http.Response, error) {
		return memAnswer(req, 200, "ok"), nil
	})
	var keys atomic.Int64
	tr.Hedging.MinSamples = 2
	tr.Hedging.Key = func(*http.Request) string { keys.Add(1); return "books" }
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	for op := 1; op <= 2; op++ {
		if _, hedged := tr.HedgeDelay("books"); hedged {
			t.Fatalf("before operation %d: hedged with %d samples, want MinSamples 2 first", op, op-1)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if _, hedged := tr.HedgeDelay("books"); !hedged {
		t.Error("after two answers: not hedged; want each operation's latency learned")
	}
	if calls.Load() != 2 || keys.Load() != 2 {
		t.Errorf("%d attempts, Hedging.Key called %d times; want 2 and 2 (once per operation)", calls.Load(), keys.Load())
	}
}

// TestHedgedStateOfAOneAttemptOperationGoesBackToThePool: the hedging
// state of an operation that ended with its one attempt, before the hedge
// fired, goes back to the pool from the operation's loop too: whether the
// first attempt went through the loop (an OnAttempt hook is set) and
// answered 200, or was sent directly and answered a 503 the budget
// refused to retry. (An operation that made more attempts keeps its
// state: their goroutines may still refer to it.)
func TestHedgedStateOfAOneAttemptOperationGoesBackToThePool(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		set    func(tr *Transport)
	}{
		{"through the loop, 200", 200, func(tr *Transport) { tr.OnAttempt = func(*http.Request, Attempt) {} }},
		{"sent directly, a 503 not retried", 503, func(tr *Transport) { tr.Budget = &refusingBudget{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, _ := hedgedMem(time.Hour, func(_ int64, req *http.Request) (*http.Response, error) {
				return memAnswer(req, c.status, "ok"), nil
			})
			c.set(tr)
			req, _ := http.NewRequest("GET", "mem://api.test/", nil)
			for try := 0; try < 100; try++ {
				resp, err := tr.RoundTrip(req)
				if err != nil || resp.StatusCode != c.status {
					t.Fatalf("RoundTrip: %v, %v; want %d", resp, err, c.status)
				}
				resp.Body.Close()
				if h := hedgedPool.Get().(*hedged); h.fireFn != nil {
					return // the state an operation used, back in the pool
				}
			}
			t.Fatal("the pool never gave back a state an operation used")
		})
	}
}

// TestDirectHedgedStateGoesBackToThePoolAsNew: the hedging state of an
// operation whose first attempt, sent directly, answered before the hedge
// delay goes back to the pool as a new one but for its alarm, stopped, and
// its ready channel, empty.
func TestDirectHedgedStateGoesBackToThePoolAsNew(t *testing.T) {
	tr, _ := hedgedMem(time.Hour, func(_ int64, req *http.Request) (*http.Response, error) {
		return memAnswer(req, 200, "ok"), nil
	})
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	for try := 0; try < 100; try++ {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := hedgedPool.Get().(*hedged)
		if h.fireFn == nil {
			continue // not the one the operation used: the pool dropped it
		}
		if len(h.ready) != 0 {
			t.Errorf("the state back in the pool holds %d values in ready; want none", len(h.ready))
		}
		kept := map[string]bool{"alarm": true, "fireFn": true, "ready": true}
		v := reflect.ValueOf(h).Elem()
		for i := range v.NumField() {
			if name := v.Type().Field(i).Name; !kept[name] && !v.Field(i).IsZero() {
				t.Errorf("the state back in the pool is not as new: %s is %+v", name, v.Field(i))
			}
		}
		return
	}
	t.Fatal("the pool never gave back a state an operation used")
}

// TestFixedHedgeDelayWithALearnedLimitKeepsLatencies: with a fixed hedge
// delay and LearnAttemptTimeout, the latencies derive the attempt limit:
// every good answer's latency is kept, the first attempt's and a
// retry's, and the hedge delay reported is the fixed one.
func TestFixedHedgeDelayWithALearnedLimitKeepsLatencies(t *testing.T) {
	t.Parallel()
	tr, calls := hedgedMem(time.Hour, func(n int64, req *http.Request) (*http.Response, error) {
		if n == 2 {
			return memAnswer(req, 503, "busy"), nil
		}
		return memAnswer(req, 200, "ok"), nil
	})
	tr.LearnAttemptTimeout = &LearnedTimeout{}
	req := twoOperationsAnswered(t, tr, calls)
	if n := tr.latencies().LookupHost(req).Held(); n != 2 {
		t.Errorf("%d latencies kept; want 2, the 200s'", n)
	}
	if d, ok := tr.HedgeDelay("api.test"); !ok || d != time.Hour {
		t.Errorf("HedgeDelay %v, %v; want the fixed 1h", d, ok)
	}
}

// twoOperationsAnswered sends two operations to mem://api.test/ through
// tr, whose Base answers the second's first attempt 503 (counted in
// calls), and checks that each ends with a 200 after three calls of
// Base in all. It returns the request sent.
func twoOperationsAnswered(t *testing.T, tr *Transport, calls *atomic.Int64) *http.Request {
	t.Helper()
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	for op := 1; op <= 2; op++ {
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("operation %d: %v; want its 200", op, err)
		}
		resp.Body.Close()
	}
	if calls.Load() != 3 {
		t.Errorf("Base called %d times, want 3", calls.Load())
	}
	return req
}

// TestHedgeAlarmOfAnOperationAnsweredLeavesNoEntry: an operation whose
// first attempt answers before the hedge delay stops its alarm, and the
// next operation's arming drops it: a thousand operations one after the
// other, with an hour's delay, leave at most one entry in hedgeAlarms (the
// last one's, stopped), through the loop (a 503 retried) and sent
// directly, and no hedge is sent.
func TestHedgeAlarmOfAnOperationAnsweredLeavesNoEntry(t *testing.T) {
	var refuse bool // the operation's first attempt is answered 503
	tr, calls := hedgedMem(time.Hour, func(_ int64, req *http.Request) (*http.Response, error) {
		if refuse {
			refuse = false
			return memAnswer(req, 503, "busy"), nil
		}
		return memAnswer(req, 200, "ok"), nil
	})
	var hedges int
	tr.OnDone = func(_ *http.Request, o Outcome) { hedges += o.Hedges }
	req, _ := http.NewRequest("GET", "mem://api.test/", nil)
	before := hedgeAlarms.Len()
	for i := range 1000 {
		refuse = i%10 == 0
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("operation %d: %v, %v; want 200", i, resp, err)
		}
		resp.Body.Close()
	}
	if n := hedgeAlarms.Len(); n > max(before, 1) {
		t.Fatalf("%d entries in hedgeAlarms after 1000 operations answered (%d before); want at most %d", n, before, max(before, 1))
	}
	if hedges != 0 || calls.Load() != 1100 {
		t.Fatalf("%d hedges, %d calls; want 0, 1100 (each tenth operation's 503 retried once)", hedges, calls.Load())
	}
}
