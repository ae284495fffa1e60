package httpretry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// startLog records when each attempt started, on the fake clock, from
// OnAttemptStart.
type startLog struct {
	mu    sync.Mutex
	clock clockwork.Clock
	t0    time.Time
	at    []time.Duration
}

func newStartLog(fc clockwork.Clock) *startLog { return &startLog{clock: fc, t0: fc.Now()} }

func (l *startLog) onStart(_ *http.Request, _ int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, l.clock.Since(l.t0))
}

func (l *startLog) starts() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.at...)
}

// hitCount adapts a counter to hitsCounter.
type hitCount struct{ n *atomic.Int32 }

func (h hitCount) Hits() int { return int(h.n.Load()) }

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHedgeStartsAtDelayAndFirstAnswerWins: with a fixed delay of 10ms,
// two slow attempts are hedged at exactly 10ms and 20ms; the third answers
// at 25ms and wins; the two losers are canceled before RoundTrip returns,
// and each hedge took one budget token.
func TestHedgeStartsAtDelayAndFirstAnswerWins(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Body: "first", Delay: 100 * ms},
		httptestutil.Step{Body: "second", Delay: 100 * ms},
		httptestutil.Step{Body: "third", Delay: 5 * ms},
	)
	budget := NewTokenBucket(5, 0)
	starts := newStartLog(fc)
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, Budget: budget, Hedging: &Hedging{Delay: 10 * ms},
		OnAttemptStart: starts.onStart, OnAttempt: log.onAttempt}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms) // attempt 1's delay, the hedge timer
	advanceAt(t, fc, base, 2, 3, 10*ms) // and attempt 2's
	advanceAt(t, fc, base, 3, 4, 5*ms)  // and attempt 3's
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != "third" {
		t.Errorf("body = %q; want the third attempt's", got)
	}
	if got, want := starts.starts(), []time.Duration{0, 10 * ms, 20 * ms}; !equalDurations(got, want) {
		t.Errorf("attempts started at %v; want %v", got, want)
	}
	want := Outcome{Attempts: 3, Reason: Final, Status: 200, Elapsed: 25 * ms, Hedges: 2, LosersCanceled: 2, Winner: 3, HedgeWon: true}
	if o != want {
		t.Errorf("outcome = %+v; want %+v", o, want)
	}
	if got := budget.Tokens(); got != 3 {
		t.Errorf("budget tokens = %v; want 3 (5 less one per hedge)", got)
	}
	if got := len(base.Responses()); got != 1 {
		t.Errorf("base returned %d responses; want only the winner's (the losers were canceled while waiting)", got)
	}
	if got := base.OpenBodies(); got != 0 {
		t.Errorf("open bodies = %d; want 0", got)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.attempts) != 3 {
		t.Fatalf("OnAttempt called %d times; want 3", len(log.attempts))
	}
	for _, a := range log.attempts {
		wantHedge, wantCanceled := a.Number > 1, a.Number != 3
		if a.Hedge != wantHedge || a.Canceled != wantCanceled {
			t.Errorf("attempt %d: hedge %v, canceled %v; want %v, %v", a.Number, a.Hedge, a.Canceled, wantHedge, wantCanceled)
		}
	}
}

// TestHedgeLosersAnsweredAreDrainedAndClosed: a loser whose response
// arrived as the winner's did is drained and closed, not returned.
func TestHedgeLosersAnsweredAreDrainedAndClosed(t *testing.T) {
	fc := clockwork.NewFakeClock()
	var hits atomic.Int32
	loser := newCountingBody("loser")
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			// Answers only once the hedge has won, which is when the
			// loser is canceled, and answers despite it, as a response
			// already on its way does.
			<-req.Context().Done()
			resp := response(req, 200, "")
			resp.Body = loser
			return resp, nil
		}
		return response(req, 200, "winner"), nil
	})
	var o Outcome
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms}, MaxAttempts: 2}
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, hitCount{&hits}, 1, 1, 10*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := readBody(t, r.resp); got != "winner" {
		t.Errorf("body = %q; want winner", got)
	}
	if o.Winner != 2 || o.LosersCanceled != 1 || o.Hedges != 1 {
		t.Errorf("outcome = %+v; want winner 2, 1 loser, 1 hedge", o)
	}
	// The loser is settled before RoundTrip returns.
	if n := loser.closes(); n != 1 {
		t.Errorf("loser's body closed %d times; want 1", n)
	}
	if n, _ := loser.Read(make([]byte, 1)); n != 0 {
		t.Errorf("loser's body not drained")
	}
}

// TestHedgeRefusedByBudgetLeavesAttemptRunning: an empty budget refuses
// the hedge; the first attempt goes on and its answer is returned.
func TestHedgeRefusedByBudgetLeavesAttemptRunning(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Body: "slow", Delay: 50 * ms})
	var buf bytes.Buffer
	tr := &Transport{Base: base, Clock: fc, Budget: NewTokenBucket(0, 0), Hedging: &Hedging{Delay: 10 * ms},
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms)
	advance(t, fc, 1, 40*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != "slow" {
		t.Errorf("body = %q", got)
	}
	want := Outcome{Attempts: 1, Reason: Final, Status: 200, Elapsed: 50 * ms, HedgesRefused: 1, Winner: 1}
	if o != want {
		t.Errorf("outcome = %+v; want %+v", o, want)
	}
	if got := base.Hits(); got != 1 {
		t.Errorf("hits = %d; want 1", got)
	}
	if !strings.Contains(buf.String(), `level=DEBUG msg="httpretry: hedge refused"`) || !strings.Contains(buf.String(), "attempt=2") {
		t.Errorf("log = %q; want a hedge refused record for attempt 2", buf.String())
	}
}

// TestHedgeNonFatalAnswerStartsNextAtOnce: the hedge sent at 10ms gets a
// 503 at 12ms; the next hedge starts then, not at 20ms, and answers; the
// first attempt, still running, is canceled.
func TestHedgeNonFatalAnswerStartsNextAtOnce(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Body: "first", Delay: 100 * ms},
		httptestutil.Step{Status: 503, Delay: 2 * ms},
		httptestutil.Step{Body: "third", Delay: 3 * ms},
	)
	starts := newStartLog(fc)
	var buf bytes.Buffer
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms}, OnAttemptStart: starts.onStart,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms)
	advanceAt(t, fc, base, 2, 3, 2*ms)
	advanceAt(t, fc, base, 3, 3, 3*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != "third" {
		t.Errorf("body = %q", got)
	}
	if got, want := starts.starts(), []time.Duration{0, 10 * ms, 12 * ms}; !equalDurations(got, want) {
		t.Errorf("attempts started at %v; want %v", got, want)
	}
	want := Outcome{Attempts: 3, Reason: Final, Status: 200, Elapsed: 15 * ms, Hedges: 2, LosersCanceled: 1, Winner: 3, HedgeWon: true}
	if o != want {
		t.Errorf("outcome = %+v; want %+v", o, want)
	}
	if !base.BodyClosed(0) {
		t.Error("the 503's body was not closed")
	}
	logs := buf.String()
	if strings.Count(logs, `msg="httpretry: hedge"`) != 2 || strings.Contains(logs, "httpretry: retry") {
		t.Errorf("log = %q; want two hedge records and no retry", logs)
	}
}

// TestHedgeDeadlineEndsEveryAttempt: every attempt hangs; the operation's
// Timeout ends them all, and RoundTrip returns only once they have ended.
func TestHedgeDeadlineEndsEveryAttempt(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Action: httptestutil.Hang},
		httptestutil.Step{Action: httptestutil.Hang},
		httptestutil.Step{Action: httptestutil.Hang},
	)
	tr := &Transport{Base: base, Clock: fc, Timeout: 50 * ms, MinAttemptTime: 10 * ms, MaxAttempts: 4, Hedging: &Hedging{Delay: 10 * ms}}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms)
	advanceAt(t, fc, base, 2, 2, 10*ms)
	advanceAt(t, fc, base, 3, 2, 30*ms)
	r := await(t, ch)
	if r.err == nil {
		t.Fatal("RoundTrip succeeded; want the deadline")
	}
	var herr *Error
	if !errors.As(r.err, &herr) || herr.Reason != DeadlineExhausted || herr.Attempts != 3 || herr.Hedges != 2 ||
		herr.Elapsed != 50*ms || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("error = %v (%+v); want deadline_exhausted after 3 attempts, 2 hedges, at 50ms", r.err, herr)
	}
}

// TestHedgeInProgressConflictWinsNothing: a hedge of a keyed POST to a
// server that deduplicates gets the idempotency layer's 409 "in progress"
// with "Retry-After: 1"; it ends nothing, no further copy goes out before
// that second has passed, and the first attempt's answer is returned.
func TestHedgeInProgressConflictWinsNothing(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 201, Body: "created", Delay: 50 * ms},
		httptestutil.Step{Status: 409, RetryAfter: "1"},
	)
	starts := newStartLog(fc)
	// The hedge's 409 is read by the loop before the clock moves on: a
	// hedge timer that fired first would race the answer that holds it.
	hedgeRead := make(chan struct{})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 3, OnAttemptStart: starts.onStart,
		OnAttempt: func(_ *http.Request, a Attempt) {
			if a.Number == 2 {
				close(hedgeRead)
			}
		},
		Hedging: &Hedging{Delay: 10 * ms, Deduplicates: true}}
	req := newRequest(t, context.Background(), "POST", "https://api.example/orders", strings.NewReader(`{"n":1}`))
	req.Header.Set(IdempotencyKeyHeader, "k1")
	var o Outcome
	ch := start(tr, req.WithContext(WithOutcome(req.Context(), &o)))
	advanceAt(t, fc, base, 1, 2, 10*ms) // the hedge, answered 409 at once
	select {
	case <-hedgeRead:
	case <-time.After(hangGuardBody):
		t.Fatal("the hedge's answer was never read")
	}
	advance(t, fc, 2, 40*ms) // no new hedge before its Retry-After: attempt 1 answers at 50ms
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != "created" || r.resp.StatusCode != 201 {
		t.Errorf("status %d, body %q; want 201 created", r.resp.StatusCode, got)
	}
	if got, want := starts.starts(), []time.Duration{0, 10 * ms}; !equalDurations(got, want) {
		t.Errorf("attempts started at %v; want %v", got, want)
	}
	if o.Winner != 1 || o.HedgeWon || o.Reason != Final || o.Hedges != 1 {
		t.Errorf("outcome = %+v; want attempt 1 to win, final, 1 hedge", o)
	}
	// Each attempt read a whole body of its own, with the same key.
	for i, r := range base.Requests() {
		if string(r.Body) != `{"n":1}` || r.Header.Get(IdempotencyKeyHeader) != "k1" {
			t.Errorf("attempt %d sent body %q, key %q; want the whole body and key k1", i+1, r.Body, r.Header.Get(IdempotencyKeyHeader))
		}
	}
}

// TestHedgeCallerCancelEndsEveryAttempt: the caller leaving during a
// hedge ends both attempts; RoundTrip returns the caller's error once
// they have ended, and counts no loser, since no attempt won.
func TestHedgeCallerCancelEndsEveryAttempt(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Action: httptestutil.Hang},
		httptestutil.Step{Action: httptestutil.Hang},
	)
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(ctx, &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 1, 10*ms)
	advanceAt(t, fc, base, 2, 1, 0)
	cancel()
	r := await(t, ch)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("error = %v; want context.Canceled", r.err)
	}
	if o.Reason != Canceled || o.Attempts != 2 || o.Hedges != 1 || o.LosersCanceled != 0 {
		t.Errorf("outcome = %+v; want canceled after 2 attempts, 1 hedge, no loser (none won)", o)
	}
}

// TestHedgeNeverForKeyedPostWithoutDeduplication: a POST with an
// idempotency key may be retried, but not hedged, unless the server
// deduplicates concurrent duplicates.
func TestHedgeNeverForKeyedPostWithoutDeduplication(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 201, Delay: 50 * ms})
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms}}
	req := newRequest(t, context.Background(), "POST", "https://api.example/orders", strings.NewReader(`{"n":1}`))
	req.Header.Set(IdempotencyKeyHeader, "k1")
	var o Outcome
	ch := start(tr, req.WithContext(WithOutcome(req.Context(), &o)))
	advanceAt(t, fc, base, 1, 1, 50*ms) // the attempt's delay alone: no hedge timer
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if o.Attempts != 1 || o.Hedges != 0 || base.Hits() != 1 {
		t.Errorf("outcome = %+v, hits %d; want one attempt, no hedge", o, base.Hits())
	}
}

// TestHedgeFinishLosersDrainsThem: with FinishLosers, the loser runs on
// after the winner, answers, and is drained and closed; RoundTrip does
// not wait for it. Transient judges each answer once: the winner's, and
// the loser's when it comes.
func TestHedgeFinishLosersDrainsThem(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Body: "late", Delay: 30 * ms},
		httptestutil.Step{Body: "fast", Delay: 5 * ms},
	)
	var judged atomic.Int32
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Hedging: &Hedging{Delay: 10 * ms, FinishLosers: time.Second},
		Transient: func(resp *http.Response, err error) bool { judged.Add(1); return IsTransient(resp, err) }}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms)
	advanceAt(t, fc, base, 2, 3, 5*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := readBody(t, r.resp); got != "fast" {
		t.Errorf("body = %q", got)
	}
	advance(t, fc, 2, 15*ms) // the loser's delay and the grace timer
	for deadline := time.Now().Add(5 * time.Second); len(base.Responses()) < 2 || !base.BodyClosed(1); {
		if time.Now().After(deadline) {
			t.Fatalf("the loser's response was not drained and closed (responses %d)", len(base.Responses()))
		}
		time.Sleep(time.Millisecond) // a poll, not a timing assumption
	}
	if got := base.BodyRead(1); got != int64(len("late")) {
		t.Errorf("loser body read %d bytes; want all %d", got, len("late"))
	}
	if o.LosersCanceled != 1 || o.Winner != 2 {
		t.Errorf("outcome = %+v; want one loser, attempt 2 winning", o)
	}
	if n := judged.Load(); n != 2 {
		t.Errorf("Transient called %d times; want 2: the winner's answer and the loser's", n)
	}
}

// TestHedgeAdaptiveNeedsSamples: with the zero Hedging, no request is
// hedged until MinSamples latencies are known; then the delay is their
// 98th percentile.
func TestHedgeAdaptiveNeedsSamples(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) { return response(req, 200, ""), nil })
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{}}
	host := "api.example"
	for i := range DefaultHedgeMinSamples {
		if _, ok := tr.HedgeDelay(host); ok {
			t.Fatalf("HedgeDelay known after %d samples; want only after %d", i, DefaultHedgeMinSamples)
		}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://"+host+"/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	d, ok := tr.HedgeDelay(host)
	if !ok || d != DefaultMinHedgeDelay {
		t.Errorf("HedgeDelay = %v, %v; want the 1ms floor over latencies of 0", d, ok)
	}
	if _, ok := tr.HedgeDelay("other.example"); ok {
		t.Error("another key has a delay without samples")
	}
}

// TestLearnedAttemptTimeoutCutsSlowAttempt: after 1000 latencies of
// 100ms, the learned limit is 130ms (p99.9 × 1.3): an attempt that hangs
// is cut then.
func TestLearnedAttemptTimeoutCutsSlowAttempt(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, LearnAttemptTimeout: &LearnedTimeout{}}
	d := tr.latencies().Lookup("api.example")
	for range defaultLearnedMinSamples {
		d.Record(100*ms, false, time.Time{})
	}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 1, 130*ms)
	r := await(t, ch)
	if !errors.Is(r.err, ErrAttemptTimeout) {
		t.Fatalf("error = %v; want an attempt timeout", r.err)
	}
	if o.Elapsed != 130*ms {
		t.Errorf("elapsed = %v; want 130ms", o.Elapsed)
	}
	if got := d.AttemptLimit(defaultLearnedMinSamples); got != 130*ms {
		t.Errorf("learned limit = %v; want 130ms", got)
	}
}

// TestHedgeBasePanicRaisedOnCallersGoroutine: a Base that panics on a
// hedge's goroutine does not crash the process: the panic is raised again
// by RoundTrip, after the first attempt has been canceled and has ended.
func TestHedgeBasePanicRaisedOnCallersGoroutine(t *testing.T) {
	fc := clockwork.NewFakeClock()
	var hits atomic.Int32
	ended := make(chan struct{})
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done()
			close(ended)
			return nil, req.Context().Err()
		}
		panic("base broke")
	})
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms}}
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
	}()
	advanceAt(t, fc, hitCount{&hits}, 1, 1, 10*ms)
	select {
	case p := <-got:
		if p != "base broke" {
			t.Errorf("recovered %v; want the Base's panic", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip neither returned nor panicked")
	}
	select {
	case <-ended:
	default:
		t.Error("RoundTrip panicked before the first attempt ended")
	}
}

// TestHedgeCappedIsSentOnceTheCapRefills: the extra-load cap is empty when
// the delay passes at 10ms, so the hedge waits, counted once as refused;
// a token comes back (another operation's share), and at 20ms the hedge is
// sent and wins. A cap that refuses does not end hedging for the operation.
func TestHedgeCappedIsSentOnceTheCapRefills(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Body: "slow", Delay: time.Second},
		httptestutil.Step{Body: "hedge", Delay: 2 * ms},
	)
	starts := newStartLog(fc)
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms}, OnAttemptStart: starts.onStart}
	d := tr.latencies().Lookup("api.example")
	for d.WithdrawExtra() {
	}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms) // the delay passes: the cap is empty
	advance(t, fc, 2, 5*ms)
	d.RefundExtra()
	advance(t, fc, 2, 5*ms) // asked again at 20ms: sent
	advanceAt(t, fc, base, 2, 3, 2*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != "hedge" {
		t.Errorf("body = %q; want the hedge's", got)
	}
	if got, want := starts.starts(), []time.Duration{0, 20 * ms}; !equalDurations(got, want) {
		t.Errorf("attempts started at %v; want %v", got, want)
	}
	want := Outcome{Attempts: 2, Reason: Final, Status: 200, Elapsed: 22 * ms, Hedges: 1, HedgesRefused: 1,
		LosersCanceled: 1, Winner: 2, HedgeWon: true}
	if o != want {
		t.Errorf("outcome = %+v; want %+v", o, want)
	}
}

// TestHedgeRefusedByThrottleLeavesAttemptRunning: a hedge passes the
// throttle as a retry does; with the host's failures making it refuse
// (p = 10/11 capped at 0.9, a draw of 0), the hedge is not sent, takes no budget token,
// and the first attempt goes on and its answer is returned.
func TestHedgeRefusedByThrottleLeavesAttemptRunning(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Body: "slow", Delay: 50 * ms})
	// The first attempt's draw, 0.95, is above the cap of 0.9: admitted;
	// the hedge's, 0, is refused.
	draws := sequence(0.95, 0)
	var drawn atomic.Int32
	th := drawing(&throttle.Throttle{MinRate: -1}, func() float64 { drawn.Add(1); return draws() })
	throttleAt(th, httptest.NewRequest("GET", "https://api.example/", nil), fc, 10, false)
	budget := NewTokenBucket(5, 0)
	tr := &Transport{Base: base, Clock: fc, Budget: budget, Hedging: &Hedging{Delay: 10 * ms}, Throttle: th}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, base, 1, 2, 10*ms)
	// The hedge's draw decides it; only then may the first attempt answer,
	// or the loop could see the answer before the delay's timer.
	for deadline := time.Now().Add(5 * time.Second); drawn.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the throttle drew %d times; want 2 (the first attempt's, the hedge's)", drawn.Load())
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, 1, 40*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("RoundTrip error: %v", r.err)
	}
	if got := readBody(t, r.resp); got != "slow" {
		t.Errorf("body = %q", got)
	}
	if o.Attempts != 1 || o.HedgesRefused != 1 || o.Hedges != 0 || o.Winner != 1 {
		t.Errorf("outcome = %+v; want 1 attempt, 1 hedge refused, none sent, winner 1", o)
	}
	if got := base.Hits(); got != 1 {
		t.Errorf("hits = %d; want 1", got)
	}
	if got := budget.Tokens(); got != 5 {
		t.Errorf("budget holds %v tokens; want 5: a refused hedge takes none", got)
	}
}

// sequence returns draws in turn, the last one from then on.
func sequence(draws ...float64) func() float64 {
	var mu sync.Mutex
	i := 0
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		d := draws[min(i, len(draws)-1)]
		i++
		return d
	}
}

// TestLearnedAttemptTimeoutWithinAttemptTimeout: the learned limit
// applies within AttemptTimeout: the smaller of the two cuts a hanging
// attempt, 130ms learned under an AttemptTimeout of 1s, and an
// AttemptTimeout of 50ms under 130ms learned.
func TestLearnedAttemptTimeoutWithinAttemptTimeout(t *testing.T) {
	for _, tt := range []struct {
		attemptTimeout, want time.Duration
	}{
		{time.Second, 130 * ms},
		{50 * ms, 50 * ms},
	} {
		t.Run(tt.attemptTimeout.String(), func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang})
			tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, AttemptTimeout: tt.attemptTimeout,
				LearnAttemptTimeout: &LearnedTimeout{}}
			d := tr.latencies().Lookup("api.example")
			for range defaultLearnedMinSamples {
				d.Record(100*ms, false, time.Time{})
			}
			var o Outcome
			ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
			advanceAt(t, fc, base, 1, 1, tt.want)
			r := await(t, ch)
			if !errors.Is(r.err, ErrAttemptTimeout) {
				t.Fatalf("error = %v; want an attempt timeout", r.err)
			}
			if o.Elapsed != tt.want {
				t.Errorf("elapsed = %v; want %v", o.Elapsed, tt.want)
			}
		})
	}
}

// TestHedgeLoserLeftToFinishEndsAtTheDeadline: with FinishLosers, a loser
// runs on after the winner, detached from the operation's context, but
// never past the operation's deadline: here FinishLosers is an hour, the
// Timeout a second, and the first attempt, which hangs, ends exactly at
// the deadline.
func TestHedgeLoserLeftToFinishEndsAtTheDeadline(t *testing.T) {
	fc := clockwork.NewFakeClock()
	t0 := fc.Now()
	var hits atomic.Int32
	loserEnded := make(chan time.Time, 1)
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done()
			loserEnded <- fc.Now()
			return nil, req.Context().Err()
		}
		return response(req, 200, "ok"), nil
	})
	tr := &Transport{Base: base, Clock: fc, Timeout: time.Second,
		Hedging: &Hedging{Delay: 10 * ms, FinishLosers: time.Hour}}
	ch := start(tr, newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
	advanceAt(t, fc, hitCount{&hits}, 1, 1, 10*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	advance(t, fc, 1, 990*ms) // to the deadline
	select {
	case at := <-loserEnded:
		if got := at.Sub(t0); got != time.Second {
			t.Errorf("the loser ended %v after the start; want at the 1s deadline", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loser left to finish outlived the operation's deadline")
	}
}
