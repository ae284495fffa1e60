// The mutation tag (make mutate) leaves out this slow real-network test:
// each mutant runs the package's tests, and these take seconds.

//go:build !mutation

package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"go.uber.org/goleak"
)

// The load test: many goroutines share one Transport and one Budget
// against a loopback server that fails about 30% of requests in mixed
// ways. It checks what must hold however the goroutines interleave.
const (
	loadGoroutines = 200
	loadOps        = 50 // per goroutine

	loadTimeout        = 2 * time.Second
	loadAttemptTimeout = 250 * ms
	loadSlowDelay      = time.Second // a slow answer: always past AttemptTimeout

	loadCapacity   = 50
	loadPerRequest = 0.1

	// An operation may end this long after its deadline: a discarded
	// response is drained for up to drainTimeout (real time) after a
	// decision that left at least MinAttemptTime, and the time the
	// scheduler takes to run a goroutine whose deadline fired. 200
	// goroutines on 2 cores under -race, with neighbours, can wait
	// seconds for that, most of all in the first burst, when every
	// goroutine dials at once. A bare twin of the load measures how long:
	// loadBareGoroutines plain http.Clients make loadBareOps requests
	// each, the same mix to the same server at the same time, each under
	// the deadline of one attempt (an operation ends late when its last
	// attempt does), and the slack is loadSlackFactor times the 99th
	// percentile of how late they returned past it, plus loadSlackFloor
	// (see bareSlack).
	loadDrainPastDeadline = drainTimeout - DefaultMinAttemptTime
	loadSlackFactor       = 3
	loadSlackFloor        = 150 * ms
	loadBareGoroutines    = loadGoroutines
	loadBareOps           = 5
)

// loadScript returns the server's script: n steps, about 30% of them
// failures (503, a closed connection, a reset in the middle of a 502's
// body, an answer slower than AttemptTimeout), from a fixed seed so that
// every run meets the same mix. Past the script, the last step (a 200)
// repeats.
func loadScript(n int) []httptestutil.Step {
	rng := rand.New(rand.NewPCG(3, 30))
	steps := make([]httptestutil.Step, n)
	for i := range steps {
		switch p := rng.IntN(100); {
		case p < 10:
			steps[i] = httptestutil.Step{Status: 503, Body: "busy"}
		case p < 17:
			steps[i] = httptestutil.Step{Action: httptestutil.CloseConn}
		case p < 24:
			steps[i] = httptestutil.Step{Action: httptestutil.ResetBody, Status: 502, Body: strings.Repeat("r", 512)}
		case p < 30:
			steps[i] = httptestutil.Step{Body: "slow", Delay: loadSlowDelay}
		default:
			steps[i] = httptestutil.Step{Body: "ok"}
		}
	}
	steps[n-1] = httptestutil.Step{Body: "ok"}
	return steps
}

// loadBudget counts what a Budget was asked and what it granted.
type loadBudget struct {
	b         Budget
	deposits  atomic.Int64
	withdrawn atomic.Int64 // granted
	refused   atomic.Int64
	refunded  atomic.Int64
}

func (c *loadBudget) Deposit() { c.deposits.Add(1); c.b.Deposit() }

func (c *loadBudget) Refund() { c.refunded.Add(1); c.b.Refund() }

func (c *loadBudget) Withdraw(ctx context.Context) bool {
	if c.b.Withdraw(ctx) {
		c.withdrawn.Add(1)
		return true
	}
	c.refused.Add(1)
	return false
}

// loadOp is what one operation did.
type loadOp struct {
	method   string
	path     string
	outcome  Outcome
	elapsed  time.Duration
	attempts int // from OnAttempt
	err      error
}

func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 operations on loopback")
	}
	// Not parallel: it should have the machine to itself, and its
	// goroutine check should see only its own goroutines.
	ignore := goleak.IgnoreCurrent()
	ops := loadGoroutines * loadOps
	srv := httptestutil.NewServer(loadScript(2 * ops)...)
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = loadGoroutines // one idle connection per goroutine
	defer base.CloseIdleConnections()

	budget := &loadBudget{b: NewTokenBucket(loadCapacity, loadPerRequest)}
	var mu sync.Mutex
	attempts := make(map[string]int) // by path, from OnAttempt
	tr := &Transport{
		Base:           base,
		Timeout:        loadTimeout,
		AttemptTimeout: loadAttemptTimeout,
		BaseDelay:      2 * ms,
		MaxDelay:       10 * ms,
		Budget:         budget,
		OnAttempt: func(req *http.Request, a Attempt) {
			mu.Lock()
			defer mu.Unlock()
			attempts[req.URL.Path]++
		},
	}
	client := &http.Client{Transport: tr}

	results := make([]loadOp, ops)
	bareBase := base.Clone()
	defer bareBase.CloseIdleConnections()
	bare := make([]time.Duration, loadBareGoroutines*loadBareOps) // how late each bare request returned
	began := time.Now()
	var wg sync.WaitGroup
	for g := range loadBareGoroutines {
		wg.Go(func() {
			for i := range loadBareOps {
				n := g*loadBareOps + i
				bare[n] = loadBareOne(&http.Client{Transport: bareBase}, srv.URL, n)
			}
		})
	}
	for g := range loadGoroutines {
		wg.Go(func() {
			for i := range loadOps {
				n := g*loadOps + i
				results[n] = loadOne(client, srv.URL, n)
			}
		})
	}
	wg.Wait()
	total := time.Since(began)
	slack, measured := bareSlack(bare, 99, loadSlackFactor, loadSlackFloor)
	limit := loadTimeout + loadDrainPastDeadline + slack

	var retries, responses, failures int
	reasons := make(map[StopReason]int)
	var slowest time.Duration
	for i := range results {
		r := &results[i]
		r.attempts = attempts[r.path]
		retries += r.outcome.Attempts - 1
		reasons[r.outcome.Reason]++
		slowest = max(slowest, r.elapsed)
		var e *Error
		if r.err != nil {
			failures++
			if !errors.As(r.err, &e) {
				t.Errorf("%s %s: err = %v; want a *Error", r.method, r.path, r.err)
			}
		} else {
			responses++
		}
		if r.elapsed > limit {
			t.Errorf("%s %s took %v; want ≤ deadline %v + drain %v + slack %v (outcome %+v)",
				r.method, r.path, r.elapsed, loadTimeout, loadDrainPastDeadline, slack, r.outcome)
		}
		if r.attempts != r.outcome.Attempts || r.outcome.Attempts < 1 || r.outcome.Attempts > DefaultMaxAttempts {
			t.Errorf("%s %s: OnAttempt saw %d attempts, Outcome %d; want the same, 1 to %d", r.method, r.path, r.attempts, r.outcome.Attempts, DefaultMaxAttempts)
		}
	}

	// The budget: one deposit per operation, a granted withdrawal for
	// every retry, a refund for every token granted to a retry that then
	// never started (TestBudgetTokenNotSpentWithoutRetry), and no more
	// retries than it can admit.
	admits := loadCapacity + int(float64(ops)*loadPerRequest)
	if got := int(budget.deposits.Load()); got != ops {
		t.Errorf("budget deposits = %d; want one per operation, %d", got, ops)
	}
	if granted, refunded := int(budget.withdrawn.Load()), int(budget.refunded.Load()); granted-refunded != retries {
		t.Errorf("budget granted %d retries and got %d back; the operations made %d retries, want granted - refunded = retries",
			granted, refunded, retries)
	}
	if retries > admits {
		t.Errorf("%d retries; the budget admits at most %d + floor(%d × %v) = %d", retries, loadCapacity, ops, loadPerRequest, admits)
	}
	if reasons[BudgetExhausted] == 0 || int(budget.refused.Load()) != reasons[BudgetExhausted] {
		t.Errorf("%d operations stopped for budget_exhausted, the budget refused %d; want equal and > 0 (the load must reach the budget)",
			reasons[BudgetExhausted], budget.refused.Load())
	}

	// A POST without a key is applied at most once, whatever happened.
	keyless := make(map[string]int)
	for _, q := range srv.Requests() {
		if q.Method == "POST" && !hasIdempotencyKey(q.Header) {
			keyless[q.Path]++
		}
	}
	for path, n := range keyless {
		if n > 1 {
			t.Errorf("POST %s without a key reached the server %d times", path, n)
		}
	}

	// No leaks: every connection goes idle, so closing the idle ones
	// closes them all, and no goroutine is left.
	bareBase.CloseIdleConnections()
	tr.CloseIdleConnections()
	for deadline := time.Now().Add(5 * time.Second); srv.OpenConns() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * ms)
		bareBase.CloseIdleConnections()
		tr.CloseIdleConnections()
	}
	if n := srv.OpenConns(); n != 0 {
		t.Errorf("%d connections still open after CloseIdleConnections: a body was left open", n)
	}
	srv.Close()
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left: %v", err)
	}

	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(reasons)) {
		fmt.Fprintf(&b, " %s=%d", k, reasons[k])
	}
	t.Logf("%d operations in %v: %d responses, %d errors; %d server requests, %d retries (budget admits %d, granted %d, refunded %d); slowest %v; reasons:%s; %s",
		ops, total.Round(ms), responses, failures, srv.Hits(), retries, admits, budget.withdrawn.Load(), budget.refunded.Load(), slowest.Round(ms), b.String(), measured)
}

// loadBareOne runs request n of the bare twin: operation n's method and
// body through a plain client, under the deadline of one of the
// Transport's attempts, reading the body as loadOne does; it returns how
// late past its deadline it returned (negative when it returned before).
func loadBareOne(client *http.Client, url string, n int) time.Duration {
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), began.Add(loadAttemptTimeout))
	defer cancel()
	method := []string{"GET", "GET", "GET", "GET", "GET", "GET", "PUT", "PUT", "POST", "POST"}[n%10]
	var body io.Reader
	if method != "GET" {
		body = bytes.NewReader([]byte(`{"qty":1}`))
	}
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("%s/bare/%d", url, n), body)
	if err != nil {
		return 0
	}
	if resp, err := client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return time.Since(began) - loadAttemptTimeout
}

// loadOne runs operation n: six in ten are GETs, two PUTs, one a POST
// with a key and one a POST without, each to its own path so that the
// server's record shows what happened to it.
func loadOne(client *http.Client, url string, n int) loadOp {
	op := loadOp{path: fmt.Sprintf("/ops/%d", n), method: "GET"}
	var body io.Reader
	switch n % 10 {
	case 6, 7:
		op.method = "PUT"
	case 8, 9:
		op.method = "POST"
	}
	if op.method != "GET" {
		body = bytes.NewReader([]byte(`{"qty":1}`))
	}
	req, err := http.NewRequestWithContext(WithOutcome(context.Background(), &op.outcome), op.method, url+op.path, body)
	if err != nil {
		op.err = err
		return op
	}
	if n%10 == 8 {
		req.Header.Set(IdempotencyKeyHeader, fmt.Sprintf("op-%d", n))
	}
	began := time.Now()
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	op.elapsed = time.Since(began)
	op.err = err
	return op
}
