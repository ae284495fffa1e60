package httpretry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds the rule that a first attempt sent directly
// (direct.go) is one the loop would have sent: the same operation on the
// same Transport with an OnAttempt hook set, which makes the loop send
// it, returns the same answer and leaves the same traces in every hook
// and in the Transport's shared state.

// TestDirectFirstAttemptAgreesWithTheLoop: for each Transport (plain,
// with a Throttle, hedged), MaxAttempts, kind of request (HEAD, GetBody
// without a Body, http.NoBody, Request.Cancel open or closed, a canceled
// context, Request.Response set), sequence of answers of Base (finals,
// transients, refused dials, (nil, nil), a nil Body, a 101, a 429 with
// quota headers, a panic) and hook that panics (a Logger's handler,
// OnWait, Jitter, the Budget's Deposit or Withdraw), the operation sent
// directly and the one the loop sends agree: RoundTrip's answer or
// panic, the bodies closed, Base's calls, the Budget's deposits,
// withdrawals and refunds, OnWait's calls, the Keys of the Throttle and
// of Hedging, the Logger's records, the Throttle's counts and quota, the
// latencies learned; and the caller's request is left as it was.
func TestDirectFirstAttemptAgreesWithTheLoop(t *testing.T) {
	t.Parallel()
	answers := [][]string{{"200"}, {"404"}, {"503", "200"}, {"503"}, {"refused", "200"}, {"refused"},
		{"nilnil", "200"}, {"nilbody"}, {"nilbodyCL"}, {"101"}, {"429"}, {"429", "200"}, {"panic"}, {"503", "panic"}}
	requests := []string{"get", "head", "getbody", "nobody", "cancel", "closedcancel", "canceledctx", "response"}
	hooks := []string{"", "logger", "onwait", "jitter", "deposit", "withdraw"}
	for _, kind := range []string{"plain", "throttle", "hedged"} {
		for _, maxAttempts := range []int{1, 3} {
			for _, reqKind := range requests {
				for _, hook := range hooks {
					for _, as := range answers {
						c := agreeCase{kind, maxAttempts, reqKind, hook, as}
						direct, loop := c.run(false), c.run(true)
						if direct != loop || strings.Contains(direct, "broken:") {
							t.Errorf("%+v:\ndirect %s\nloop   %s", c, direct, loop)
						}
					}
				}
			}
		}
	}
}

// agreeCase is one operation of TestDirectFirstAttemptAgreesWithTheLoop.
type agreeCase struct {
	kind        string // "plain", "throttle" or "hedged" (with a delay never reached)
	maxAttempts int
	req         string   // the kind of request (see request)
	hook        string   // the hook that panics, "" for none
	answers     []string // Base's answers in turn (see agreeAnswer), the last from then on
}

// run runs the operation, sent by the loop when loop is set, and
// describes what it did.
func (c agreeCase) run(loop bool) string {
	var calls, closed, waits, throttleKeys, hedgingKeys atomic.Int64
	base := &http.Transport{}
	base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		return agreeAnswer(c.answers[min(int(n), len(c.answers))-1], req, &closed)
	}))
	logs := &recordStrings{}
	budget := &countBudget{}
	tr := &Transport{Base: base, Budget: budget, MaxAttempts: c.maxAttempts,
		BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond,
		Logger: slog.New(logs), OnWait: func(*http.Request, Wait) { waits.Add(1) }}
	switch c.kind {
	case "throttle":
		tr.Throttle = &throttle.Throttle{Key: func(*http.Request) string { throttleKeys.Add(1); return "k" }}
	case "hedged":
		tr.Hedging = &Hedging{Delay: time.Hour, Key: func(*http.Request) string { hedgingKeys.Add(1); return "k" }}
	}
	c.setPanickingHook(tr)
	if loop {
		tr.OnAttempt = func(*http.Request, Attempt) {}
	}
	req := c.request()
	before := describeRequest(req)
	var resp *http.Response
	var err error
	p := func() (p any) {
		defer func() { p = recover() }()
		resp, err = tr.RoundTrip(req)
		return nil
	}()
	var b strings.Builder
	fmt.Fprintf(&b, "panic=%v ", p)
	if resp != nil {
		body, rerr := io.ReadAll(resp.Body)
		cerr := resp.Body.Close()
		fmt.Fprintf(&b, "status=%d body=%q read=%v close=%v ", resp.StatusCode, body, rerr, cerr)
	}
	if err != nil {
		fmt.Fprintf(&b, "err=%v ", err)
	}
	if p == nil && (resp == nil) == (err == nil) {
		b.WriteString("broken: not exactly one of resp and err ")
	}
	if describeRequest(req) != before {
		b.WriteString("broken: the request was modified ")
	}
	fmt.Fprintf(&b, "closed=%d calls=%d budget=%d/%d/%d waits=%d keys=%d/%d logs=%q",
		closed.Load(), calls.Load(), budget.deposits.Load(), budget.withdrawals.Load(), budget.refunds.Load(),
		waits.Load(), throttleKeys.Load(), hedgingKeys.Load(), logs.all())
	if th := tr.Throttle; th != nil {
		requests, accepts := throttleCounts(th, "k")
		d := th.Dest(req)
		fmt.Fprintf(&b, " throttle=%v/%v idle=%v quota=%v", requests, accepts, d.Idle(), d.QuotaKnown())
	}
	if tr.Hedging != nil {
		fmt.Fprintf(&b, " latencies=%d", latenciesHeld(tr.latencies().Lookup("k"), 5))
	}
	return b.String()
}

// setPanickingHook sets on tr the hook c names, one that panics.
func (c agreeCase) setPanickingHook(tr *Transport) {
	switch c.hook {
	case "logger":
		tr.Logger = slog.New(panickingHandler{})
	case "onwait":
		tr.OnWait = func(*http.Request, Wait) { panic("OnWait broke") }
	case "jitter":
		tr.Jitter = func(time.Duration) time.Duration { panic("Jitter broke") }
	case "deposit", "withdraw":
		tr.Budget = failingBudget{c.hook}
	}
}

// request makes the request of c's kind, to a "mem://" URL.
func (c agreeCase) request() *http.Request {
	method := http.MethodGet
	if c.req == "head" {
		method = http.MethodHead
	}
	req, _ := http.NewRequest(method, "mem://api.test/books", nil)
	switch c.req {
	case "getbody":
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	case "nobody":
		req.Body = http.NoBody
	case "cancel":
		//lint:ignore SA1019 the deprecated channel must be honoured on both paths
		req.Cancel = make(chan struct{})
	case "closedcancel":
		ch := make(chan struct{})
		close(ch)
		//lint:ignore SA1019 the deprecated channel must be honoured on both paths
		req.Cancel = ch
	case "canceledctx":
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(fmt.Errorf("caller left"))
		req = req.WithContext(ctx)
	case "response":
		req.Response = &http.Response{StatusCode: http.StatusFound}
	}
	return req
}

// describeRequest describes what of req RoundTrip must leave as it is.
func describeRequest(req *http.Request) string {
	//lint:ignore SA1019 the deprecated channel is part of the request left as it is
	return fmt.Sprintf("%s %v %v %p %p %p", req.Method, req.URL, req.Header, req.Body, req.Cancel, req.Response)
}

// agreeAnswer is Base's answer to req of the given kind: a status, a
// refused dial, (nil, nil), a 200 with a nil Body and no length or a
// length, a 101, a 429 with Retry-After and a spent quota, or a panic.
// The bodies it makes count their closes in closed.
func agreeAnswer(kind string, req *http.Request, closed *atomic.Int64) (*http.Response, error) {
	body := func(s string) io.ReadCloser { return &closeCount{Reader: strings.NewReader(s), closed: closed} }
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}
	switch kind {
	case "refused":
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case "nilnil":
		return nil, nil
	case "nilbody":
		resp.ContentLength = -1
	case "nilbodyCL":
		resp.ContentLength = 5
	case "101":
		resp.StatusCode, resp.Body = http.StatusSwitchingProtocols, body("")
	case "429":
		resp.StatusCode, resp.Body = http.StatusTooManyRequests, body("slow down")
		resp.Header = http.Header{"Retry-After": {"0"}, "Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"1"}}
	case "panic":
		panic("Base broke")
	default:
		fmt.Sscan(kind, &resp.StatusCode)
		resp.Body = body("answer")
	}
	return resp, nil
}

// closeCount is a response body that counts its closes.
type closeCount struct {
	io.Reader
	closed *atomic.Int64
}

func (b *closeCount) Close() error { b.closed.Add(1); return nil }

// failingBudget is a Budget whose Deposit or Withdraw (where) panics.
type failingBudget struct{ where string }

func (b failingBudget) Deposit() {
	if b.where == "deposit" {
		panic("Deposit broke")
	}
}

func (b failingBudget) Withdraw(context.Context) bool {
	if b.where == "withdraw" {
		panic("Withdraw broke")
	}
	return true
}

func (failingBudget) Refund() {}

// recordStrings is a slog.Handler that keeps each record as a string:
// its level, message and attributes but the time left, which the clock
// decides.
type recordStrings struct {
	mu      sync.Mutex
	records []string
}

func (h *recordStrings) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordStrings) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordStrings) WithGroup(string) slog.Handler            { return h }
func (h *recordStrings) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "time_left" {
			s += " " + a.String()
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, s)
	return nil
}

func (h *recordStrings) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.records
}

// latenciesHeld is how many latencies the set holds for a key, counted
// up to most.
func latenciesHeld(d interface {
	HedgeDelay(int, time.Duration) (time.Duration, bool)
}, most int) int {
	n := 0
	for ; n < most; n++ {
		if _, ok := d.HedgeDelay(n+1, 0); !ok {
			break
		}
	}
	return n
}

// TestDirectHedgedFiredAgreesWithTheLoop: when the hedge fires while the
// first attempt, sent directly, is in Base, the operation goes on as the
// loop's would have, whichever way it ends: the hedge wins, the first
// attempt wins, the first answers a 503 (set aside, a third attempt sent,
// the hedge wins), or the caller leaves before the delay. The answer,
// Base's calls, the Budget, the Keys of the Throttle and of Hedging, the
// Throttle's counts, the latencies learned and the Logger's records
// agree.
func TestDirectHedgedFiredAgreesWithTheLoop(t *testing.T) {
	t.Parallel()
	for _, scenario := range []string{"hedge wins", "first wins", "first answers 503", "caller leaves before the delay"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			direct, loop := runFired(t, scenario, false), runFired(t, scenario, true)
			if direct != loop {
				t.Errorf("direct %s\nloop   %s", direct, loop)
			}
		})
	}
}

// arrival is an attempt that reached Base: Base answers it with what
// the test sends on reply.
type arrival struct {
	req   *http.Request
	reply chan func(*http.Request) (*http.Response, error)
}

// runFired runs an operation of TestDirectHedgedFiredAgreesWithTheLoop on
// a fake clock, sent by the loop when loop is set, and describes what it
// did.
func runFired(t *testing.T, scenario string, loop bool) string {
	arrivals := make(chan arrival, 10)
	var calls, throttleKeys, hedgingKeys atomic.Int64
	base := &http.Transport{}
	base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		calls.Add(1)
		a := arrival{req, make(chan func(*http.Request) (*http.Response, error), 1)}
		arrivals <- a
		return (<-a.reply)(req)
	}))
	logs := &recordStrings{}
	budget := &countBudget{}
	fc := clockwork.NewFakeClock()
	tr := &Transport{Base: base, Budget: budget, MaxAttempts: 3, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond,
		Clock: fc, Logger: slog.New(logs),
		Throttle: &throttle.Throttle{Key: func(*http.Request) string { throttleKeys.Add(1); return "k" }},
		Hedging:  &Hedging{Delay: time.Second, Key: func(*http.Request) string { hedgingKeys.Add(1); return "k" }}}
	if loop {
		tr.OnAttempt = func(*http.Request, Attempt) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answer := func(status int) func(*http.Request) (*http.Response, error) {
		return func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: http.Header{}, Request: req, Body: io.NopCloser(strings.NewReader(fmt.Sprint(status)))}, nil
		}
	}
	untilCanceled := func(req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	ch := start(tr, newRequest(t, ctx, "GET", "mem://api.test/books", nil))
	first := <-arrivals
	if scenario == "caller leaves before the delay" {
		first.reply <- untilCanceled
		cancel()
	} else {
		advance(t, fc, 1, time.Second)
		hedge := <-arrivals
		switch scenario {
		case "hedge wins":
			first.reply <- untilCanceled
			hedge.reply <- answer(200)
		case "first wins":
			hedge.reply <- untilCanceled
			first.reply <- answer(200)
		case "first answers 503":
			first.reply <- answer(503)
			third := <-arrivals
			third.reply <- untilCanceled
			hedge.reply <- answer(200)
		}
	}
	r := await(t, ch)
	var b strings.Builder
	if r.resp != nil {
		body, _ := io.ReadAll(r.resp.Body)
		r.resp.Body.Close()
		fmt.Fprintf(&b, "status=%d body=%q ", r.resp.StatusCode, body)
	}
	if r.err != nil {
		fmt.Fprintf(&b, "err=%v ", r.err)
	}
	requests, accepts := throttleCounts(tr.Throttle, "k")
	fmt.Fprintf(&b, "calls=%d budget=%d/%d/%d keys=%d/%d throttle=%v/%v latencies=%d logs=%q",
		calls.Load(), budget.deposits.Load(), budget.withdrawals.Load(), budget.refunds.Load(),
		throttleKeys.Load(), hedgingKeys.Load(), requests, accepts, latenciesHeld(tr.latencies().Lookup("k"), 5), logs.all())
	return b.String()
}
