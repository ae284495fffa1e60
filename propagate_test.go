package httpretry

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// TestNestedTransportsRetryOnce: an httpretry Transport under another makes
// one attempt per call, so 3 × 3 stays 3.
func TestNestedTransportsRetryOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(inner *Transport) http.RoundTripper
	}{
		{"directly nested", func(inner *Transport) http.RoundTripper { return inner }},
		{"behind an SDK's own RoundTripper", func(inner *Transport) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context()) // as SDKs that add headers do
				r.Header.Set("User-Agent", "sdk/1.0")
				return inner.RoundTrip(r)
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			failing := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
			var innerLog attemptLog
			inner := &Transport{Base: failing, MaxAttempts: 3, Jitter: noJitter, OnDone: innerLog.onDone}
			outer := &Transport{Base: tc.wrap(inner), MaxAttempts: 3, Jitter: noJitter}
			var o Outcome
			resp, err := outer.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if failing.Hits() != 3 {
				t.Errorf("dependency saw %d requests; want 3, not 9", failing.Hits())
			}
			if o.Attempts != 3 || o.Reason != AttemptsExhausted {
				t.Errorf("outer outcome = %+v; want 3 attempts, attempts_exhausted", o)
			}
			if len(innerLog.done) != 3 {
				t.Fatalf("inner OnDone called %d times; want 3", len(innerLog.done))
			}
			for i, d := range innerLog.done {
				if d.Attempts != 1 {
					t.Errorf("inner operation %d made %d attempts; want 1", i+1, d.Attempts)
				}
			}
			if failing.OpenBodies() != 0 {
				t.Errorf("%d bodies left open", failing.OpenBodies())
			}
		})
	}
}

func TestInnerLayerLeavesBudgetAlone(t *testing.T) {
	t.Parallel()
	innerBudget := NewTokenBucket(5, 1)
	withdrawAll(t, innerBudget)
	inner := &Transport{Base: httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}), Budget: innerBudget, Jitter: noJitter}
	outer := &Transport{Base: inner, Jitter: noJitter}
	resp, err := outer.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := innerBudget.Tokens(); got != 0 {
		t.Errorf("inner budget gained %v tokens; the outer layer owns the budget", got)
	}
}

func TestPropagateHeaders(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Clock: fc, Timeout: 2 * time.Second, AttemptTimeout: 800 * ms,
		BaseDelay: time.Second, Jitter: waits(300*ms, 700*ms), Propagate: true}
	req := newRequest(t, context.Background(), "GET", "http://api.test/", nil)
	ch := start(tr, req)
	// Waiters: the operation's deadline, each finished attempt's deadline
	// (a canceled fake context keeps its timer until it would fire) and
	// the wait.
	advance(t, fc, 3, 300*ms)
	advance(t, fc, 4, 700*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	// Attempt 1 at 0 s: limited by AttemptTimeout (800 ms). Attempt 2 at
	// 300 ms: 800 ms again. Attempt 3 at 1 s: 1 s left of the deadline
	// but 800 ms attempt limit.
	want := []struct{ attempt, timeout string }{{"1", "800"}, {"2", "800"}, {"3", "800"}}
	reqs := base.Requests()
	if len(reqs) != 3 {
		t.Fatalf("got %d requests; want 3", len(reqs))
	}
	for i, w := range want {
		if got := reqs[i].Header.Get(AttemptHeader); got != w.attempt {
			t.Errorf("attempt %d %s = %q; want %q", i+1, AttemptHeader, got, w.attempt)
		}
		if got := reqs[i].Header.Get(TimeoutHeader); got != w.timeout {
			t.Errorf("attempt %d %s = %q; want %q", i+1, TimeoutHeader, got, w.timeout)
		}
	}
	if req.Header.Get(AttemptHeader) != "" {
		t.Error("the caller's request got propagation headers")
	}
}

func TestPropagateTimeLeft(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Clock: fc, Timeout: time.Second, BaseDelay: time.Second, Jitter: waits(650 * ms), Propagate: true}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 2, 650*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	reqs := base.Requests()
	if got := reqs[0].Header.Get(TimeoutHeader); got != "1000" {
		t.Errorf("first attempt timeout = %q; want 1000", got)
	}
	if got := reqs[1].Header.Get(TimeoutHeader); got != "350" {
		t.Errorf("second attempt timeout = %q; want the 350 ms left", got)
	}
}

func TestPropagateWithoutDeadline(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil)
	tr := &Transport{Base: base, Propagate: true}
	req := newRequest(t, context.Background(), "GET", "http://api.test/", nil)
	req.Header.Set(TimeoutHeader, "99999") // a stale value must not leak through
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	h := base.Requests()[0].Header
	if h.Get(AttemptHeader) != "1" || h.Get(TimeoutHeader) != "" {
		t.Errorf("headers %v; want attempt 1 and no timeout", h)
	}
}

func TestPropagateOffSendsNothing(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil)
	resp, err := (&Transport{Base: base, Timeout: time.Second}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	h := base.Requests()[0].Header
	if _, ok := h[AttemptHeader]; ok {
		t.Errorf("headers %v; want no propagation without Propagate", h)
	}
	if _, ok := h[TimeoutHeader]; ok {
		t.Errorf("headers %v; want no propagation without Propagate", h)
	}
}

func TestShouldRetryHeaders(t *testing.T) {
	t.Parallel()
	keyed := &http.Request{Method: "POST", Header: http.Header{IdempotencyKeyHeader: {"k"}}}
	tests := []struct {
		status int
		header string
		value  string
		want   bool
	}{
		{503, "X-Should-Retry", "false", false},
		{429, "X-Should-Retry", "FALSE", false},
		{500, "Stripe-Should-Retry", "false", false},
		{400, "X-Should-Retry", "true", true},
		{409, "Stripe-Should-Retry", "true", true},
		{503, "X-Should-Retry", "maybe", true},  // malformed: ignored
		{400, "X-Should-Retry", "1", false},     // malformed: ignored
		{400, "Stripe-Should-Retry", "", false}, // empty: ignored
		{503, "X-Should-Retry", " false ", false},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status)+" "+tt.header+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Request: keyed}
			resp.Header.Set(tt.header, tt.value)
			if got := IsTransient(resp, nil); got != tt.want {
				t.Errorf("IsTransient = %v; want %v", got, tt.want)
			}
		})
	}
	// A success is never retried, whatever it carries.
	for _, status := range []int{200, 201, 304} {
		resp := &http.Response{StatusCode: status, Header: http.Header{"X-Should-Retry": {"true"}}}
		if IsTransient(resp, nil) {
			t.Errorf("%d with X-Should-Retry: true was transient", status)
		}
	}
	// X-Should-Retry wins over Stripe-Should-Retry.
	resp := &http.Response{StatusCode: 503, Header: http.Header{"X-Should-Retry": {"false"}, "Stripe-Should-Retry": {"true"}}}
	if IsTransient(resp, nil) {
		t.Error("X-Should-Retry: false must win over Stripe-Should-Retry: true")
	}
}

func TestShouldRetryTrueMakesUnsafeRepeatable(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"X-Should-Retry", "Stripe-Should-Retry"} {
		base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 400, Header: http.Header{h: {"true"}}})
		tr := &Transport{Base: base, Jitter: noJitter, Budget: Unlimited}
		var o Outcome
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "POST", "http://api.test/charges", nil))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if base.Hits() != 3 || o.Reason != AttemptsExhausted {
			t.Errorf("%s: true: hits %d, outcome %+v; want 3 and attempts_exhausted", h, base.Hits(), o)
		}
	}
	// Without the server's word, a keyless POST is sent once.
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
	tr := &Transport{Base: base, Jitter: noJitter}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "POST", "http://api.test/charges", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if base.Hits() != 1 || o.Reason != NotIdempotent {
		t.Errorf("plain 503: hits %d, outcome %+v; want 1 and not_idempotent", base.Hits(), o)
	}
	// The same answer to a GET is retried.
	base = httptestutil.NewTransport(nil, httptestutil.Step{Status: 400, Header: http.Header{"X-Should-Retry": {"true"}}}, httptestutil.Step{Status: 200})
	tr = &Transport{Base: base, Jitter: noJitter}
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want 200 after retrying the 400", resp, err)
	}
	readBody(t, resp)
}

// TestOneAttemptWrapperLeavesRetriesBelow: an outer Transport that makes
// one attempt (added for a deadline or hooks) does not take ownership of
// retries: the retrying Transport below it still retries.
func TestOneAttemptWrapperLeavesRetriesBelow(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	inner := &Transport{Base: base, Jitter: noJitter}
	var attempts []int
	outer := &Transport{Base: inner, MaxAttempts: 1, Timeout: 10 * time.Second,
		OnAttempt: func(_ *http.Request, a Attempt) { attempts = append(attempts, a.Status) }}
	resp, err := outer.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != 200 || base.Hits() != 3 {
		t.Errorf("status %d after %d hits; want 200 after 3: the inner Transport retries", resp.StatusCode, base.Hits())
	}
	if len(attempts) != 1 {
		t.Errorf("the outer Transport made %d attempts; want 1", len(attempts))
	}
}

func TestPropagateOnRequestWithoutHeader(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil)
	req := &http.Request{Method: "GET", URL: mustURL(t, "http://api.test/")} // Header is nil
	resp, err := (&Transport{Base: base, Propagate: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := base.Requests()[0].Header.Get(AttemptHeader); got != "1" {
		t.Errorf("%s = %q; want 1", AttemptHeader, got)
	}
}

// TestPropagatedTimeoutIsWhatTheCallerWillWait: Request-Timeout is the
// time the caller will still wait when the request is written. With a
// 700ms dial and AttemptTimeout 1.5s, the next service is told at most
// 800ms, not the 1.5s left when the attempt began.
func TestPropagatedTimeoutIsWhatTheCallerWillWait(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("needs 2s of real time")
	}
	const dialDelay, attemptTimeout = 700 * time.Millisecond, 1500 * time.Millisecond
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Get(TimeoutHeader)
			}))
			base := serverBase(t, srv).Clone()
			t.Cleanup(base.CloseIdleConnections)
			dialer := &net.Dialer{}
			base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				select {
				case <-time.After(dialDelay): // a slow network
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return dialer.DialContext(ctx, network, addr)
			}
			base.ForceAttemptHTTP2 = p.h2 // a custom DialContext turns it off unless forced
			tr := &Transport{Base: base, AttemptTimeout: attemptTimeout, Propagate: true}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			v := <-got
			ms, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s = %q; want whole milliseconds", TimeoutHeader, v)
			}
			// The dial took at least dialDelay, whatever the machine's load.
			if limit := (attemptTimeout - dialDelay).Milliseconds(); int64(ms) > limit {
				t.Errorf("%s = %dms; want at most %dms, the attempt's time left after the dial", TimeoutHeader, ms, limit)
			}
		})
	}
}

// TestPropagatedTimeoutAfterStreamSlotWait: over HTTP/2 with a server that
// allows one stream at a time and a client that respects it strictly, a
// request that waits 700ms for a stream slot on the connection it already
// got is written with at most AttemptTimeout minus that wait in
// Request-Timeout: the time spent queued is time the caller no longer has.
func TestPropagatedTimeoutAfterStreamSlotWait(t *testing.T) {
	realTime(t)
	const hold, attemptTimeout = 700 * time.Millisecond, 1500 * time.Millisecond
	got := make(chan string, 1)
	holding := make(chan struct{})
	srv := newUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(holding)
			time.Sleep(hold)
			return
		}
		got <- r.Header.Get(TimeoutHeader)
	}))
	srv.EnableHTTP2 = true
	srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base := serverBase(t, srv).Clone()
	t.Cleanup(base.CloseIdleConnections)
	base.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
	// Warm the connection so that the server's SETTINGS are known.
	warm, err := base.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/warm", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, warm)
	<-got
	held := make(chan error, 1)
	go func() {
		resp, err := base.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/hold", nil))
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	<-holding
	tr := &Transport{Base: base, AttemptTimeout: attemptTimeout, Propagate: true}
	start := time.Now()
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	checkProto(t, resp, true)
	ms, err := strconv.Atoi(<-got)
	if err != nil {
		t.Fatal(err)
	}
	// The request was queued until the held one ended: at least until
	// now minus the time the server took, whatever the machine's load.
	if limit := attemptTimeout.Milliseconds() - 300; time.Since(start) >= hold-200*time.Millisecond && int64(ms) > limit {
		t.Errorf("%s = %dms after a queue of about %v; want at most %dms", TimeoutHeader, ms, hold, limit)
	}
}
