// The mutation tag (make mutate) leaves out this slow real-network test:
// each mutant runs the package's tests, and these take seconds.

//go:build !mutation

package httpretry

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"go.uber.org/goleak"
)

// The fault matrix plays every fault below (refused and dropped
// connections, resets before and in the middle of a body, hangs,
// trickling bodies, 429 and 503 with every form of Retry-After, a 10 MiB
// error body, the server's should-retry word, a success after two
// failures) against every kind of request, over HTTP/1.1 and HTTP/2 on
// real loopback sockets (and, for the faults where it matters, with
// BufferResponse on as well).
//
// A cell predicts nothing. Its Base records what each attempt met, and the
// cell checks that what the Transport did is what docs/rules.md's rules
// allow for those facts (faultmatrix_rules_test.go): the stop reason, each
// wait, what was returned, what a POST without a key may do, what was
// sent and closed, and that the operation ended within its deadline. Real
// sockets decide races the test cannot control, such as whether a reset
// lands before or after the headers; whichever way one went, the verdict
// judges the facts of that run.
//
// Every cell uses the short policy below, so that the whole matrix runs in
// a few seconds even though its cells wait for real.
const (
	fmMaxAttempts    = 3
	fmTimeout        = 2 * time.Second // long enough to honour a Retry-After of 1s once, not twice
	fmAttemptTimeout = 600 * ms        // three hangs fit in Timeout; a TLS handshake under load fits in one
	fmMinAttemptTime = 100 * ms
	fmBaseDelay      = 5 * ms
	fmMaxDelay       = 20 * ms
	fmMaxRetryAfter  = 2 * time.Second
	fmTrickle        = 50 * ms

	// A cell may end this long after its deadline: a discarded response
	// is drained for up to drainTimeout (real time) after a decision that
	// left at least MinAttemptTime, and the time the scheduler takes to
	// run a goroutine whose deadline fired, which a bareProbe measures.
	fmDrainPastDeadline = drainTimeout - fmMinAttemptTime

	// fmSlackFactor and fmSlackFloor turn the bare requests' lateness
	// into the cells' slack; see bareSlack. The floor covers what a bare
	// request does not do: a second timer (the drain's) that may fire
	// late, and the hooks.
	fmSlackFactor = 3
	fmSlackFloor  = 150 * ms
	fmProbes      = 8 // bare clients measuring lateness beside the cells

	// fmConcurrency is how many cells run at once. Cells spend most of
	// their time waiting, so running them one by one would take minutes.
	fmConcurrency = 16

	// fmHeavyConcurrency is how many of the CPU-bound cells (10 MiB bodies:
	// HTTP/2 sends 4 MiB of each through TLS before its flow control stops
	// it) run at once: more would starve the timing of the others.
	fmHeavyConcurrency = 2

	// fmReadLimit is how much of a returned body the caller reads before
	// closing it: enough to reach a reset or a stall, without copying
	// megabytes per cell.
	fmReadLimit = 64 << 10
)

// fmJitter draws the whole backoff window: deterministic, and the largest
// wait FullJitter could draw, so the deadline checks see the worst case.
func fmJitter(window time.Duration) time.Duration { return window }

// fmBufferLimit is BufferResponse in the "+buf" cells: more than every
// error body and trickled body of the matrix, less than the 10 MiB one.
const fmBufferLimit = 64 << 10

// fmTransport returns the matrix's Transport over base, with
// BufferResponse on when buffer is set.
func fmTransport(base http.RoundTripper, buffer bool) *Transport {
	var limit int64
	if buffer {
		limit = fmBufferLimit
	}
	return &Transport{
		Base:           base,
		BufferResponse: limit,
		MaxAttempts:    fmMaxAttempts,
		Timeout:        fmTimeout,
		AttemptTimeout: fmAttemptTimeout,
		MinAttemptTime: fmMinAttemptTime,
		BaseDelay:      fmBaseDelay,
		MaxDelay:       fmMaxDelay,
		MaxRetryAfter:  fmMaxRetryAfter,
		Jitter:         fmJitter,
		Budget:         Unlimited, // the budget has its own tests; here it would only add noise
	}
}

// fmPayload is every request body of the matrix.
const fmPayload = `{"book":"b1","qty":2}`

// fmBody is how a matrix request carries its body.
type fmBody int

const (
	fmNoBody   fmBody = iota
	fmGetBody         // a bytes.Reader: http.NewRequest sets GetBody
	fmBuffered        // no GetBody, known length: the Transport buffers it
	fmOnce            // no GetBody, unknown length: sent again only if never read
)

// fmMethod is a row group of the matrix: a method, a body and whether the
// request carries an Idempotency-Key. The POSTs without GetBody carry a
// key, so that the body alone decides whether they can be repeated.
type fmMethod struct {
	name   string
	method string
	key    bool
	body   fmBody
}

var fmMethods = []fmMethod{
	{"GET", "GET", false, fmNoBody},
	{"PUT", "PUT", false, fmGetBody},
	{"POST+key", "POST", true, fmGetBody},
	{"POST", "POST", false, fmGetBody},
	{"POST+key/len", "POST", true, fmBuffered},
	{"POST+key/stream", "POST", true, fmOnce},
}

// idempotent is IsIdempotent's rule: the method, or a key.
func (m fmMethod) idempotent() bool { return m.method != "POST" || m.key }

func (m fmMethod) request(ctx context.Context, url string) (*http.Request, error) {
	var body io.Reader
	if m.body == fmGetBody {
		body = bytes.NewReader([]byte(fmPayload))
	}
	req, err := http.NewRequestWithContext(ctx, m.method, url, body)
	if err != nil {
		return nil, err
	}
	switch m.body {
	case fmBuffered:
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(fmPayload)), int64(len(fmPayload))
	case fmOnce:
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(fmPayload)), -1
	}
	if m.key {
		req.Header.Set(IdempotencyKeyHeader, "order-7281")
	}
	return req, nil
}

// fmFault is a column group of the matrix.
type fmFault struct {
	name string
	// steps builds the server's script; nil for refused, which no server
	// can play.
	steps func() []httptestutil.Step
	// breaks is set when every response body the server sends breaks off
	// before its end: reset, or trickled past the deadline.
	breaks bool
	// heavy is set for the CPU-bound faults; see fmHeavyConcurrency.
	heavy bool
	// buffer adds "+buf" cells, with BufferResponse on, for the faults
	// where it changes the outcome, and for two controls.
	buffer bool
}

// fmRetryAfter is one of the Retry-After forms of the matrix.
type fmRetryAfter struct {
	name  string
	value func(date time.Time) string // date is the server's Date header
	skew  time.Duration               // how far the server's clock is ahead of ours
}

var fmRetryAfters = []fmRetryAfter{
	{name: "seconds", value: func(time.Time) string { return "1" }},
	{name: "future date", value: func(d time.Time) string { return d.Add(time.Second).Format(http.TimeFormat) }},
	{name: "past date", value: func(d time.Time) string { return d.Add(-time.Hour).Format(http.TimeFormat) }},
	// The server's clock is an hour ahead: its date means 1s from its Date
	// header, not an hour and a second from our clock.
	{name: "skewed date", skew: time.Hour, value: func(d time.Time) string { return d.Add(time.Second).Format(http.TimeFormat) }},
	{name: "negative", value: func(time.Time) string { return "-1" }},
	{name: "fractional", value: func(time.Time) string { return "0.5" }},
	{name: "empty", value: func(time.Time) string { return "" }},
	// Saturates to the largest Duration: valid, and never fits a deadline.
	{name: "huge", value: func(time.Time) string { return "999999999999999999999" }},
	{name: "garbage", value: func(time.Time) string { return "soon" }},
}

// fmBig is the 10 MiB error body.
var fmBig = strings.Repeat("x", 10<<20)

// fmScript returns a steps function that plays steps.
func fmScript(steps ...httptestutil.Step) func() []httptestutil.Step {
	return func() []httptestutil.Step { return steps }
}

func fmFaults() []fmFault {
	faults := []fmFault{
		{name: "refused"},
		// HTTP/1: the server reads the request and closes the connection;
		// HTTP/2: the handler aborts, resetting the stream. Either way the
		// request arrived and no response came.
		{name: "closed before response", steps: fmScript(httptestutil.Step{Action: httptestutil.CloseConn})},
		{
			name:   "reset mid-body",
			steps:  fmScript(httptestutil.Step{Action: httptestutil.ResetBody, Body: strings.Repeat("r", 4096)}),
			breaks: true,
			buffer: true,
		},
		{name: "hang", steps: fmScript(httptestutil.Step{Action: httptestutil.Hang})},
		// 1,000 bytes at one byte per 50ms: 50s, forever as far as the
		// test goes, and short enough to buffer.
		{
			name:   "trickle forever",
			steps:  fmScript(httptestutil.Step{Action: httptestutil.Trickle, Body: strings.Repeat("t", 1000), Interval: fmTrickle}),
			breaks: true,
			buffer: true,
		},
	}
	for _, code := range []int{429, 503} {
		for _, ra := range fmRetryAfters {
			faults = append(faults, fmFault{
				name: fmt.Sprintf("%d retry-after %s", code, ra.name),
				steps: func() []httptestutil.Step {
					// The Date header is set explicitly: the delay a date
					// means is then exact, whatever second the request
					// lands in.
					date := time.Now().UTC().Add(ra.skew).Truncate(time.Second)
					h := http.Header{"Date": {date.Format(http.TimeFormat)}, "Retry-After": {ra.value(date)}}
					return []httptestutil.Step{{Status: code, Header: h, Body: "busy"}}
				},
			})
		}
	}
	faults = append(faults,
		fmFault{
			name:   "500 with 10 MiB body",
			steps:  fmScript(httptestutil.Step{Status: 500, Body: fmBig}),
			heavy:  true,
			buffer: true, // a control: too long to buffer
		},
		// Shorter than drainLimit, so the drain tries it and gives up on
		// time, not on size.
		fmFault{
			name:   "503 trickling body",
			steps:  fmScript(httptestutil.Step{Action: httptestutil.Trickle, Status: 503, Body: strings.Repeat("t", 1000), Interval: fmTrickle}),
			breaks: true,
			buffer: true,
		},
		// The server's word: "true" makes a 404 worth another attempt,
		// and even a POST without a key safe to send again; "false" makes
		// a 503 final.
		fmFault{
			name:  "404 X-Should-Retry true",
			steps: fmScript(httptestutil.Step{Status: 404, Header: http.Header{"X-Should-Retry": {"true"}}, Body: "not yet"}),
		},
		fmFault{
			name:  "503 Stripe-Should-Retry false",
			steps: fmScript(httptestutil.Step{Status: 503, Header: http.Header{"Stripe-Should-Retry": {"false"}}, Body: "no"}),
		},
		fmFault{
			name: "200 after two failures",
			steps: fmScript(httptestutil.Step{Status: 503, Body: "busy"}, httptestutil.Step{Status: 502, Body: "bad gateway"},
				httptestutil.Step{Status: 200, Body: "ok"}),
			buffer: true, // a control: complete bodies, buffered or not
		},
	)
	return faults
}

// fmCell is one cell of the matrix.
type fmCell struct {
	fault  fmFault
	method fmMethod
	proto  string // "h1" or "h2"
	buffer bool   // BufferResponse is on
}

func (c fmCell) name() string { return c.fault.name + "/" + c.method.name + "/" + c.protoName() }

func (c fmCell) protoName() string {
	if c.buffer {
		return c.proto + "+buf"
	}
	return c.proto
}

// fmResult is what a cell observed.
type fmResult struct {
	setupErr error
	resp     bool // a response was returned
	status   int
	proto    int // the returned response's ProtoMajor
	err      error
	readErr  error
	outcome  Outcome
	attempts []Attempt // from OnAttempt
	calls    []*fmCall // from the recorder
	// atReturn is, for each attempt, what had become of its response
	// body (if any) when RoundTrip returned.
	atReturn  []fmBodyState
	returned  time.Duration // from the request until RoundTrip returned
	elapsed   time.Duration // from the request to the returned body's Close
	hits      int
	keyless   int      // POSTs without a key the server received
	bodies    []string // the request bodies the server received
	newConns  int
	openConns int // after CloseIdleConnections
}

// fmWaitConns closes the client's idle connections until the server has
// none open, or gives up after a while, and returns how many are open. It
// closes them more than once because a connection goes back to the pool
// a moment after its last body is closed (HTTP/2 settles a stream's end
// on the connection's own goroutine), and the server notices a close a
// moment after the client made it. A body left open keeps its connection
// busy for good, so it still shows. The bound is generous (a passing cell
// returns as soon as its connections close): on a machine whose load
// average is ten times its cores, closing hundreds of HTTP/2 connections
// at once took longer than two seconds, and the verdict must not depend
// on the load.
func fmWaitConns(srv *httptestutil.Server, closeIdle func()) int {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		closeIdle()
		if srv.OpenConns() == 0 {
			return 0
		}
		time.Sleep(5 * ms)
	}
	return srv.OpenConns()
}

// run plays the cell against its own server and client, as the caller:
// it reads part of any returned body and closes it.
func (c fmCell) run() (r fmResult) {
	var (
		url  string
		base *http.Transport
		srv  *httptestutil.Server
	)
	if c.fault.steps == nil {
		addr, err := closedAddr()
		if err != nil {
			r.setupErr = err
			return r
		}
		scheme := "http://"
		if c.proto == "h2" {
			scheme = "https://"
		}
		url, base = scheme+addr, &http.Transport{ForceAttemptHTTP2: c.proto == "h2"}
	} else {
		if c.proto == "h2" {
			srv = httptestutil.NewTLSServer(c.fault.steps()...)
		} else {
			srv = httptestutil.NewServer(c.fault.steps()...)
		}
		defer srv.Close()
		base = srv.Client().Transport.(*http.Transport).Clone()
		base.ForceAttemptHTTP2 = c.proto == "h2"
		url = srv.URL
	}
	defer base.CloseIdleConnections()
	rec := &fmRecorder{base: base}
	tr := fmTransport(rec, c.buffer)
	var mu sync.Mutex
	tr.OnAttempt = func(_ *http.Request, a Attempt) {
		mu.Lock()
		defer mu.Unlock()
		r.attempts = append(r.attempts, a)
	}
	req, err := c.method.request(WithOutcome(context.Background(), &r.outcome), url+"/books/b1")
	if err != nil {
		r.setupErr = err
		return r
	}
	began := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	r.returned = time.Since(began)
	r.calls = rec.snapshot()
	for _, call := range r.calls {
		var st fmBodyState
		if call.body != nil {
			st = call.body.state()
		}
		r.atReturn = append(r.atReturn, st)
	}
	if resp != nil {
		r.resp, r.status, r.proto = true, resp.StatusCode, resp.ProtoMajor
		_, r.readErr = io.Copy(io.Discard, io.LimitReader(resp.Body, fmReadLimit))
		resp.Body.Close()
	}
	r.elapsed = time.Since(began)
	r.err = err
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		r.hits, r.newConns = srv.Hits(), srv.NewConns()
		for _, q := range srv.Requests() {
			r.bodies = append(r.bodies, string(q.Body))
			if q.Method == "POST" && !hasIdempotencyKey(q.Header) {
				r.keyless++
			}
		}
		// Every connection must now be idle: a body left open, by the
		// Transport or by an unclosed discarded response, keeps its
		// connection (or HTTP/2 stream) busy.
		r.openConns = fmWaitConns(srv, tr.CloseIdleConnections)
	}
	return r
}

// check judges a cell's result by docs/rules.md's rules, returning each
// violation. slack is how long past its deadline (and the drain's
// allowance) the cell may end.
func (c fmCell) check(r fmResult, slack time.Duration) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if r.setupErr != nil {
		return []string{"setup: " + r.setupErr.Error()}
	}
	n := len(r.calls)
	switch {
	case r.hits > fmMaxAttempts:
		fail("server hits %d > MaxAttempts %d", r.hits, fmMaxAttempts)
	case n < 1 || n > fmMaxAttempts || len(r.attempts) != n || r.outcome.Attempts != n:
		fail("Base saw %d attempts, OnAttempt %d, Outcome %d; want equal, 1 to MaxAttempts %d", n, len(r.attempts), r.outcome.Attempts, fmMaxAttempts)
		return bad // the other checks read attempts and calls side by side
	}
	if limit := fmTimeout + fmDrainPastDeadline + slack; r.elapsed > limit {
		fail("took %v; want ≤ deadline %v + drain %v + slack %v", r.elapsed, fmTimeout, fmDrainPastDeadline, slack)
	}
	if r.openConns != 0 {
		fail("%d connections still open after CloseIdleConnections: a body was left open", r.openConns)
	}
	c.checkRules(r, fail)
	c.checkKeyless(r, fail)
	c.checkResult(r, fail)
	c.checkBodies(r, fail)
	return bad
}

// TestFaultMatrix: see the comment at the top of this file. It is not
// parallel, so that its timings and its goroutine check see only its own
// cells; the cells themselves run fmConcurrency at a time, with a
// bareProbe beside them to measure the slack their deadlines get.
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix waits on real sockets for several seconds")
	}
	ignore := goleak.IgnoreCurrent()
	var cells []*fmCell
	for _, f := range fmFaults() {
		for _, m := range fmMethods {
			for _, proto := range []string{"h1", "h2"} {
				for _, buffer := range []bool{false, true} {
					if buffer && !f.buffer {
						continue
					}
					cells = append(cells, &fmCell{fault: f, method: m, proto: proto, buffer: buffer})
				}
			}
		}
	}

	probe := startBareProbe(fmProbes, fmTimeout)
	obs := make([]fmResult, len(cells))
	sem := make(chan struct{}, fmConcurrency)
	heavy := make(chan struct{}, fmHeavyConcurrency)
	var wg sync.WaitGroup
	// Every cell plays, even those -run leaves out of the verdicts, so
	// that the load is the same whatever is selected.
	for i, c := range cells {
		wg.Go(func() {
			if c.fault.heavy {
				heavy <- struct{}{}
				defer func() { <-heavy }()
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			obs[i] = c.run()
		})
	}
	wg.Wait()
	slack, measured := bareSlack(probe.stop(fmProbes), 99, fmSlackFactor, fmSlackFloor)

	verdicts := make([]string, len(cells))
	for i, c := range cells {
		t.Run(c.name(), func(t *testing.T) {
			bad := c.check(obs[i], slack)
			if len(bad) == 0 {
				verdicts[i] = "held"
				return
			}
			verdicts[i] = "FAILED"
			for _, b := range bad {
				t.Error(b)
			}
		})
	}

	// Cells that -run left out have no verdict and are not counted.
	tried, held := 0, 0
	var latest time.Duration // the latest end past the deadline
	for i, v := range verdicts {
		if v != "" {
			tried++
			latest = max(latest, obs[i].elapsed-fmTimeout)
		}
		if v == "held" {
			held++
		}
	}
	if testing.Verbose() {
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "fault\tmethod\tproto\thits\treason\tstatus\telapsed\tverdict")
		for i, c := range cells {
			if verdicts[i] == "" {
				continue
			}
			r := obs[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%v\t%s\n", c.fault.name, c.method.name, c.protoName(),
				r.hits, r.outcome.Reason, r.status, r.elapsed.Round(ms), verdicts[i])
		}
		tw.Flush()
		t.Log("\n" + b.String())
	}
	t.Logf("%d cells: %d held; %s; latest cell end past the deadline: %v", tried, held, measured, latest.Round(ms))

	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left by the matrix: %v", err)
	}
}

// TestHiddenRetriesBounded shows that the retries net/http makes on its
// own, inside one of our attempts, are bounded by AttemptTimeout and by
// the operation's deadline, and that they are real: the server sees more
// requests than the Transport made attempts.
//
// net/http's HTTP/2 transport sends a request again after REFUSED_STREAM,
// up to 7 times with backoff sleeps of 1s, 2s, 4s… (about a minute in
// all). After a GOAWAY that did not cover the request it is worse: the
// connection is dead, so the HTTP/1 layer dials a new one and tries again
// at once, with no count and no sleep, for as long as the request's
// context lives (measured: ~30 requests per 300ms attempt here, ~1,000 in
// 2s without httpretry). Its HTTP/1 transport sends an idempotent request
// again when a reused connection turns out to be closed.
func TestHiddenRetriesBounded(t *testing.T) {
	t.Parallel()
	// The slack past each deadline is measured beside the test, against
	// bare requests running into a deadline of the same length, so that
	// a busy machine's lateness is not taken for a missed bound. Each
	// subtest waits for the measurement before it judges time.
	probe := startBareProbe(4, 300*ms)
	var (
		slackOnce   sync.Once
		hiddenSlack time.Duration
	)
	slack := func(t *testing.T) time.Duration {
		slackOnce.Do(func() {
			var desc string
			hiddenSlack, desc = bareSlack(probe.stop(8), 99, 3, 300*ms)
			t.Log(desc)
		})
		return hiddenSlack
	}
	t.Cleanup(func() { slack(t) })
	tests := []struct {
		name           string
		h2             string // "refuse" or "goaway"; "" for HTTP/1
		timeout        time.Duration
		attemptTimeout time.Duration
		wantAttempts   int
		wantReason     StopReason
	}{
		{"h2 REFUSED_STREAM within AttemptTimeout", "refuse", time.Second, 300 * ms, 3, AttemptsExhausted},
		{"h2 GOAWAY within AttemptTimeout", "goaway", time.Second, 300 * ms, 3, AttemptsExhausted},
		// One attempt, stuck in net/http's 1s backoff sleep, until the
		// operation's deadline ends it with too little time left to retry.
		{"h2 REFUSED_STREAM within Timeout", "refuse", 500 * ms, 0, 1, DeadlineExhausted},
		// Each request is closed 200ms after it arrives: the first
		// attempt's hidden retry would end at 400ms, AttemptTimeout ends
		// it at 300ms; the others run on new connections, which net/http
		// does not retry.
		{"h1 reused connection closed", "", time.Second, 300 * ms, 3, AttemptsExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				base *http.Transport
				url  string
				hits func() int
				warm int // requests made before the measured one
			)
			if tt.h2 != "" {
				srv := newRefusingH2Server(t, tt.h2 == "goaway")
				base, url, hits = srv.transport(), srv.url(), srv.streams
			} else {
				// The first request leaves an idle connection in the pool;
				// the server closes it, 200ms after reading the next
				// request, without answering. net/http sends that request
				// again on a new connection, which ends the same way.
				srv := httptestutil.NewServer(httptestutil.Step{Body: "warm"},
					httptestutil.Step{Action: httptestutil.CloseConn, Delay: 200 * ms})
				t.Cleanup(srv.Close)
				base = srv.Client().Transport.(*http.Transport).Clone()
				url, hits, warm = srv.URL, srv.Hits, 1
				resp, err := (&http.Client{Transport: base}).Get(url)
				if err != nil {
					t.Fatal(err)
				}
				readBody(t, resp)
			}
			defer base.CloseIdleConnections()
			var log attemptLog
			tr := &Transport{Base: base, Timeout: tt.timeout, AttemptTimeout: tt.attemptTimeout,
				BaseDelay: 5 * ms, Jitter: noJitter, OnAttempt: log.onAttempt}
			var o Outcome
			began := time.Now()
			_, err := (&http.Client{Transport: tr}).Do(newRequest(t, WithOutcome(context.Background(), &o), "GET", url, nil))
			elapsed := time.Since(began)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v; want a *httpretry.Error", err)
			}
			// On a busy machine attempts and timers run late, so the time
			// left may no longer hold another attempt: the rules then stop
			// with deadline_exhausted, after fewer attempts.
			late := e.Reason == DeadlineExhausted && e.Attempts < tt.wantAttempts
			if !late && (e.Reason != tt.wantReason || e.Attempts != tt.wantAttempts) {
				t.Fatalf("err = %v; want %s after %d attempts", err, tt.wantReason, tt.wantAttempts)
			}
			hiddenSlack := slack(t)
			if elapsed > tt.timeout+hiddenSlack {
				t.Errorf("took %v; want ≤ Timeout %v + %v", elapsed, tt.timeout, hiddenSlack)
			}
			for _, a := range log.attempts {
				if tt.attemptTimeout > 0 && a.Duration > tt.attemptTimeout+hiddenSlack {
					t.Errorf("attempt %d took %v; want ≤ AttemptTimeout %v + %v", a.Number, a.Duration, tt.attemptTimeout, hiddenSlack)
				}
				if !errors.Is(a.Err, ErrAttemptTimeout) && tt.h2 != "" {
					t.Errorf("attempt %d ended with %v; want our time limit to end net/http's retrying", a.Number, a.Err)
				}
			}
			// Over HTTP/2 the refusal is immediate, so net/http always
			// sends again underneath. Over HTTP/1.1 it does only when the
			// server's close (200ms after the request) reaches it before
			// AttemptTimeout (300ms) does, which a busy machine can delay
			// past it: then each attempt is one request, which the bounds
			// above allow just as well.
			// A machine busy enough to spend the whole Timeout on the TLS
			// handshake gets no request to the server at all: nothing to
			// retry underneath, and the bounds above still hold.
			got := hits() - warm
			switch {
			case got == 0 && o.Attempts == 1 && elapsed >= tt.timeout:
				t.Logf("%s: the one attempt spent the whole %v before reaching the server", tt.name, tt.timeout)
			case got < o.Attempts || (tt.h2 != "" && got == o.Attempts):
				t.Errorf("server saw %d requests for %d attempts; want more: net/http retries underneath", got, o.Attempts)
			default:
				t.Logf("%s: %d attempts reached the server as %d requests in %v", tt.name, o.Attempts, got, elapsed.Round(ms))
			}
		})
	}
}

// refusingH2Server speaks just enough HTTP/2, over TLS on loopback, to
// refuse every request it receives: with RST_STREAM(REFUSED_STREAM), or
// with a GOAWAY that covers no stream. Those are the two answers after
// which net/http's HTTP/2 transport sends the request again by itself; a
// net/http server gives neither on demand. It never decodes headers (HPACK
// is not needed to refuse a stream) and never sends any.
type refusingH2Server struct {
	ln     net.Listener
	goaway bool
	ts     *httptest.Server // lends its certificate and a client that trusts it

	mu    sync.Mutex // protects n and conns
	n     int        // HEADERS frames received: requests, hidden retries included
	conns []net.Conn
	wg    sync.WaitGroup
}

// HTTP/2 frame types, flags and error codes used by refusingH2Server (RFC
// 9113 §6, §7).
const (
	h2FrameHeaders   = 0x1
	h2FrameRSTStream = 0x3
	h2FrameSettings  = 0x4
	h2FramePing      = 0x6
	h2FrameGoAway    = 0x7
	h2FlagAck        = 0x1
	h2Preface        = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

func newRefusingH2Server(t *testing.T, goaway bool) *refusingH2Server {
	t.Helper()
	ts := newUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	cfg := &tls.Config{Certificates: ts.TLS.Certificates, NextProtos: []string{"h2"}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		ts.Close()
		t.Fatal(err)
	}
	s := &refusingH2Server{ln: ln, goaway: goaway, ts: ts}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *refusingH2Server) url() string { return "https://" + s.ln.Addr().String() }

// transport returns a client transport that trusts the server and speaks
// HTTP/2 to it.
func (s *refusingH2Server) transport() *http.Transport {
	tr := s.ts.Client().Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true
	return tr
}

func (s *refusingH2Server) streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *refusingH2Server) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.ts.Close()
}

func (s *refusingH2Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.serve(c)
		}()
	}
}

// serve reads frames until the connection ends, answering SETTINGS and
// PING as the protocol requires and refusing every HEADERS frame.
func (s *refusingH2Server) serve(c net.Conn) {
	preface := make([]byte, len(h2Preface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != h2Preface {
		return
	}
	if writeH2Frame(c, h2FrameSettings, 0, 0, nil) != nil {
		return
	}
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		stream := binary.BigEndian.Uint32(hdr[5:9]) & 0x7fffffff
		payload := make([]byte, length)
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		var err error
		switch {
		case typ == h2FrameSettings && flags&h2FlagAck == 0:
			err = writeH2Frame(c, h2FrameSettings, h2FlagAck, 0, nil)
		case typ == h2FramePing && flags&h2FlagAck == 0:
			err = writeH2Frame(c, h2FramePing, h2FlagAck, 0, payload)
		case typ == h2FrameHeaders:
			s.mu.Lock()
			s.n++
			s.mu.Unlock()
			if s.goaway {
				// Last-Stream-ID 0, NO_ERROR: nothing was processed.
				err = writeH2Frame(c, h2FrameGoAway, 0, 0, binary.BigEndian.AppendUint32(make([]byte, 4), 0))
			} else {
				err = writeH2Frame(c, h2FrameRSTStream, 0, stream, binary.BigEndian.AppendUint32(nil, h2RefusedStream))
			}
		}
		if err != nil {
			return
		}
	}
}

func writeH2Frame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	hdr := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags}
	hdr = binary.BigEndian.AppendUint32(hdr, stream)
	_, err := w.Write(append(hdr, payload...))
	return err
}
