package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	for _, tr := range []*Transport{
		{},
		{MaxAttempts: -1, MinAttemptTime: -1, BaseDelay: -1, MaxDelay: -1, MaxRetryAfter: -1},
	} {
		if got := tr.maxAttempts(); got != 3 {
			t.Errorf("maxAttempts() = %d; want 3", got)
		}
		if got := tr.minAttemptTime(); got != 100*ms {
			t.Errorf("minAttemptTime() = %v; want 100ms", got)
		}
		if got := tr.baseDelay(); got != 100*ms {
			t.Errorf("baseDelay() = %v; want 100ms", got)
		}
		if got := tr.maxDelay(); got != 5*time.Second {
			t.Errorf("maxDelay() = %v; want 5s", got)
		}
		if got := tr.maxRetryAfter(); got != 30*time.Second {
			t.Errorf("maxRetryAfter() = %v; want 30s", got)
		}
		if _, ok := tr.base().(*http.Transport); !ok {
			t.Errorf("base() = %T; want *http.Transport", tr.base())
		}
		if tr.base() != tr.base() {
			t.Error("default Base is not kept")
		}
		if b, ok := tr.budget().(*TokenBucket); !ok || b.Tokens() != 20 || b.perRequest != tokenUnit/10 {
			t.Errorf("budget() = %#v; want NewTokenBucket(20, 0.1)", tr.budget())
		}
	}
	if got := (&Transport{}).bufferRequest(); got != 1<<20 {
		t.Errorf("bufferRequest() = %d; want 1 MiB", got)
	}
	if got := (&Transport{BufferRequest: -1}).bufferRequest(); got >= 0 {
		t.Errorf("negative BufferRequest = %d; want it kept negative (disabled)", got)
	}
	if (&Transport{}).clock() == nil {
		t.Error("clock() = nil")
	}
}

func TestMaxAttemptsOneDisablesRetries(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
	tr := &Transport{Base: base, MaxAttempts: 1}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if base.Hits() != 1 || o.Reason != AttemptsExhausted {
		t.Errorf("hits %d, outcome %+v; want 1 attempt, attempts_exhausted", base.Hits(), o)
	}
}

func TestBrokenBase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		resp     func(*http.Request) *http.Response
		method   string
		wantErr  string
		wantBody bool
	}{
		{name: "nil response and nil error", resp: func(*http.Request) *http.Response { return nil },
			method: "GET", wantErr: "returned a nil response and a nil error"},
		{name: "nil body with content", method: "GET", wantErr: "returned a response with a nil Body",
			resp: func(r *http.Request) *http.Response {
				return &http.Response{StatusCode: 200, ContentLength: 5, Request: r}
			}},
		{name: "nil body, empty", method: "GET", wantBody: true,
			resp: func(r *http.Request) *http.Response { return &http.Response{StatusCode: 204, Request: r} }},
		{name: "nil body on HEAD", method: "HEAD", wantBody: true,
			resp: func(r *http.Request) *http.Response {
				return &http.Response{StatusCode: 200, ContentLength: 5, Request: r}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) { calls++; return tt.resp(r), nil })
			tr := &Transport{Base: base}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), tt.method, "http://api.test/", nil))
			if tt.wantBody {
				if err != nil || resp.Body != http.NoBody {
					t.Fatalf("got %v, %v; want a response with http.NoBody", resp, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tt.wantErr) || e.Reason != Final || calls != 1 {
				t.Errorf("err = %v after %d calls; want a final *Error containing %q", err, calls, tt.wantErr)
			}
		})
	}
}

func TestBothResponseAndErrorFromBase(t *testing.T) {
	t.Parallel()
	body := newCountingBody("x")
	boom := errors.New("boom")
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: body}, boom
	})
	_, err := (&Transport{Base: base}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if !errors.Is(err, boom) || body.closes() != 1 {
		t.Errorf("err %v, body closes %d; want the error and the stray body closed", err, body.closes())
	}
}

func TestNilRequest(t *testing.T) {
	t.Parallel()
	if _, err := (&Transport{}).RoundTrip(nil); err == nil {
		t.Error("RoundTrip(nil) returned no error")
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	e := &Error{Method: "POST", Outcome: Outcome{Attempts: 1, Reason: NotIdempotent,
		Err: &url.Error{Op: "Post", URL: "https://u:p@h/x?token=t", Err: io.ErrUnexpectedEOF}, Unknown: true}}
	want := "httpretry: POST: 1 attempt: not_idempotent: outcome unknown: unexpected EOF"
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	e = &Error{Method: "GET", Outcome: Outcome{Attempts: 3, Reason: AttemptsExhausted, Err: io.EOF}}
	if got, want := e.Error(), "httpretry: GET: 3 attempts: attempts_exhausted: EOF"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if errors.Is(e, ErrOutcomeUnknown) {
		t.Error("an idempotent request's error matched ErrOutcomeUnknown")
	}
}

func TestIdempotencyKeyGeneration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		method   string
		key      string
		wantKey  string // "" means no key sent
		wantHits int
	}{
		{"POST gets one key for all attempts", "POST", "", "gen-1", 3},
		{"caller's key kept", "POST", "mine", "mine", 3},
		{"GET needs none", "GET", "", "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
			n := 0
			var mu sync.Mutex
			tr := &Transport{Base: base, Jitter: noJitter, NewIdempotencyKey: func() string {
				mu.Lock()
				defer mu.Unlock()
				n++
				return "gen-" + string(rune('0'+n))
			}}
			req := newRequest(t, context.Background(), tt.method, "http://api.test/orders", strings.NewReader("{}"))
			if tt.key != "" {
				req.Header.Set(IdempotencyKeyHeader, tt.key)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if base.Hits() != tt.wantHits {
				t.Errorf("hits = %d; want %d", base.Hits(), tt.wantHits)
			}
			for i, r := range base.Requests() {
				if got := r.Header.Get(IdempotencyKeyHeader); got != tt.wantKey {
					t.Errorf("attempt %d key %q; want %q", i+1, got, tt.wantKey)
				}
			}
			if tt.key == "" && req.Header.Get(IdempotencyKeyHeader) != "" {
				t.Error("the caller's request got a key")
			}
		})
	}
}

// TestNonIdempotent covers a POST without a key: retried only after a dial
// error, and otherwise reported as unknown.
func TestNonIdempotent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		steps       []httptestutil.Step
		wantHits    int
		wantReason  StopReason
		wantUnknown bool
		wantStatus  int
	}{
		{"refused twice then created", []httptestutil.Step{{Err: httptestutil.ErrRefused}, {Err: httptestutil.ErrRefused}, {Status: 201}},
			3, Final, false, 201},
		{"refused every time", []httptestutil.Step{{Err: httptestutil.ErrRefused}}, 3, AttemptsExhausted, false, 0},
		{"reset after sending", []httptestutil.Step{{Err: httptestutil.ErrReset}}, 1, NotIdempotent, true, 0},
		{"connection closed", []httptestutil.Step{{Action: httptestutil.CloseConn}}, 1, NotIdempotent, true, 0},
		{"refused then reset", []httptestutil.Step{{Err: httptestutil.ErrRefused}, {Err: httptestutil.ErrReset}}, 2, NotIdempotent, true, 0},
		{"503 answered", []httptestutil.Step{{Status: 503}}, 1, NotIdempotent, false, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := httptestutil.NewTransport(nil, tt.steps...)
			tr := &Transport{Base: base, Jitter: noJitter}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "POST", "http://api.test/charges", strings.NewReader(`{"amount":100}`))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				readBody(t, resp)
			}
			if base.Hits() != tt.wantHits || o.Reason != tt.wantReason || o.Status != tt.wantStatus {
				t.Errorf("hits %d, outcome %+v; want %d hits, %s, status %d", base.Hits(), o, tt.wantHits, tt.wantReason, tt.wantStatus)
			}
			if got := errors.Is(err, ErrOutcomeUnknown); got != tt.wantUnknown {
				t.Errorf("errors.Is(%v, ErrOutcomeUnknown) = %v; want %v", err, got, tt.wantUnknown)
			}
			if (tt.wantStatus == 0) != (err != nil) {
				t.Errorf("err = %v with status %d", err, tt.wantStatus)
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Jitter: noJitter, Budget: Unlimited}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if base.OpenBodies() != 0 {
		t.Errorf("%d bodies left open", base.OpenBodies())
	}
}

// The tests below use real sockets on loopback.

func TestLoopbackRetriesReuseConnection(t *testing.T) {
	t.Parallel()
	srv := httptestutil.NewServer(
		httptestutil.Step{Status: 503, Body: "busy"},
		httptestutil.Step{Status: 502, Body: "bad gateway"},
		httptestutil.Step{Status: 200, Body: "ok"},
	)
	defer srv.Close()
	tr := &Transport{Jitter: noJitter}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL + "/books")
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "ok" {
		t.Errorf("body = %q", got)
	}
	if srv.Hits() != 3 || srv.NewConns() != 1 {
		t.Errorf("hits %d over %d connections; want 3 over 1 (drained bodies let it be reused)", srv.Hits(), srv.NewConns())
	}
}

func TestLoopbackPOSTWithKey(t *testing.T) {
	t.Parallel()
	srv := httptestutil.NewServer(
		httptestutil.Step{Action: httptestutil.CloseConn},
		httptestutil.Step{Status: 503},
		httptestutil.Step{Status: 201, Body: `{"id":"o1"}`},
	)
	defer srv.Close()
	tr := &Transport{Jitter: noJitter}
	defer tr.CloseIdleConnections()
	req := newRequest(t, context.Background(), "POST", srv.URL+"/orders", strings.NewReader(`{"book":"b1"}`))
	req.Header.Set(IdempotencyKeyHeader, "checkout-7281-payment")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	reqs := srv.Requests()
	if len(reqs) != 3 || resp.StatusCode != 201 {
		t.Fatalf("got %d requests, status %d; want 3 and 201", len(reqs), resp.StatusCode)
	}
	for i, r := range reqs {
		if r.Header.Get(IdempotencyKeyHeader) != "checkout-7281-payment" || string(r.Body) != `{"book":"b1"}` {
			t.Errorf("attempt %d: key %q body %q", i+1, r.Header.Get(IdempotencyKeyHeader), r.Body)
		}
	}
}

func TestLoopbackPOSTWithoutKeyNotRetriedAfterReset(t *testing.T) {
	t.Parallel()
	srv := httptestutil.NewServer(httptestutil.Step{Action: httptestutil.CloseConn}, httptestutil.Step{Status: 201})
	defer srv.Close()
	tr := &Transport{Jitter: noJitter}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"amount":100}`))
	if resp != nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v; want ErrOutcomeUnknown through *url.Error", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != NotIdempotent || e.Attempts != 1 {
		t.Errorf("err = %v; want not_idempotent after 1 attempt", err)
	}
	if srv.Hits() != 1 {
		t.Errorf("server saw %d requests; want 1", srv.Hits())
	}
}

func TestLoopbackPOSTRetriedAfterRefused(t *testing.T) {
	t.Parallel()
	addr, err := closedAddr()
	if err != nil {
		t.Fatal(err)
	}
	var log attemptLog
	tr := &Transport{Jitter: noJitter, OnAttempt: log.onAttempt}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Post("http://"+addr+"/charges", "application/json", strings.NewReader(`{}`))
	var e *Error
	if !errors.As(err, &e) || e.Reason != AttemptsExhausted || e.Attempts != 3 {
		t.Fatalf("err = %v; want attempts_exhausted after 3 refused attempts", err)
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		t.Error("a refused POST never reached the server; its outcome is known")
	}
	if len(log.attempts) != 3 || ErrorClass(log.attempts[2].Err) != "connection_refused" {
		t.Errorf("attempts = %+v", log.attempts)
	}
}

func TestLoopbackClientTimeoutOnTop(t *testing.T) {
	realTime(t)
	t.Parallel()
	srv := httptestutil.NewServer(httptestutil.Step{Action: httptestutil.Hang})
	defer srv.Close()
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 150 * ms}
	start := time.Now()
	_, err := client.Get(srv.URL)
	elapsed := time.Since(start)
	var uerr *url.Error
	if !errors.As(err, &uerr) || !uerr.Timeout() {
		t.Fatalf("err = %v; want a url.Error that is a timeout", err)
	}
	// http.Client replaces a timed-out error with its own, keeping only
	// the text.
	if !strings.Contains(err.Error(), "httpretry: GET: 1 attempt: canceled") {
		t.Errorf("err = %v; want canceled after 1 attempt", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("took %v; want about the client's 150ms", elapsed)
	}
}

func TestLoopbackAttemptTimeoutBoundsBody(t *testing.T) {
	realTime(t)
	t.Parallel()
	// The body trickles one byte per 50 ms: reading it all would take 5 s,
	// but AttemptTimeout also bounds reading the returned body.
	srv := httptestutil.NewServer(httptestutil.Step{Action: httptestutil.Trickle, Body: strings.Repeat("x", 100), Interval: 50 * ms})
	defer srv.Close()
	tr := &Transport{AttemptTimeout: 300 * ms}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(b) >= 100 {
		t.Errorf("read %d bytes, err %v; want the read cut short by AttemptTimeout", len(b), err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("reading took %v; want it bounded by the 300ms attempt limit", time.Since(start))
	}
}

func TestLoopbackTricklingErrorBodyDoesNotStall(t *testing.T) {
	realTime(t)
	t.Parallel()
	srv := httptestutil.NewServer(
		httptestutil.Step{Action: httptestutil.Trickle, Status: 503, Body: strings.Repeat("x", 1000), Interval: 50 * ms},
		httptestutil.Step{Status: 200, Body: "ok"},
	)
	defer srv.Close()
	tr := &Transport{Jitter: noJitter}
	defer tr.CloseIdleConnections()
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "ok" {
		t.Errorf("body = %q", got)
	}
	// A 1,000-byte body at 20 bytes a second would take 50 s to drain.
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("took %v; the drain must give up after %v", elapsed, drainTimeout)
	}
}

func TestFakeClockWithCallerDeadline(t *testing.T) {
	t.Parallel()
	// Retry-After larger than the time left on the caller's own deadline.
	fc := clockwork.NewFakeClock()
	ctx, cancel := clockwork.WithTimeout(context.Background(), fc, 2*time.Second)
	defer cancel()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503, RetryAfter: "2"})
	var o Outcome
	resp, err := (&Transport{Base: base, Clock: fc}).RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if o.Reason != RetryAfterExceedsDeadline {
		t.Errorf("outcome = %+v; want retry_after_exceeds_deadline", o)
	}
}

// TestJitterDrawnOnce: each retry draws its wait once, from the Jitter
// the Transport has; FullJitter is not drawn beside a custom Jitter, and a
// success draws nothing. Not parallel: it counts fullJitter's draws.
func TestJitterDrawnOnce(t *testing.T) {
	var defaults int
	saved := fullJitter
	fullJitter = func(w time.Duration) time.Duration { defaults++; return saved(w) }
	defer func() { fullJitter = saved }()

	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	var custom int
	tr := &Transport{Base: base, BaseDelay: time.Nanosecond, Jitter: func(time.Duration) time.Duration { custom++; return 0 }}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if custom != 2 || defaults != 0 {
		t.Errorf("custom Jitter drawn %d times, FullJitter %d; want 2 and 0", custom, defaults)
	}
	tr = &Transport{Base: httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200}), BaseDelay: time.Nanosecond}
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if defaults != 1 {
		t.Errorf("FullJitter drawn %d times for one retry; want 1", defaults)
	}
}

func TestCloseIdleConnectionsOfDefaultBase(t *testing.T) {
	t.Parallel()
	srv := httptestutil.NewServer()
	defer srv.Close()
	tr := &Transport{}
	tr.CloseIdleConnections() // before first use: nothing to close, no panic
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	tr.CloseIdleConnections()
	for deadline := time.Now().Add(2 * time.Second); srv.OpenConns() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // the server notices the close a moment later
	}
	if n := srv.OpenConns(); n != 0 {
		t.Errorf("%d connections open after CloseIdleConnections; want 0", n)
	}
}

// TestBrokenBaseMore extends TestBrokenBase: a Base that breaks the
// RoundTripper contract on a retry, after a valid attempt, or in ways a
// retry loop could trip on (no Header, a nil Body on a retryable status),
// gets a clear error or is handled, never a panic, and nothing it
// returned is left open.
func TestBrokenBaseMore(t *testing.T) {
	t.Parallel()
	first := newCountingBody("busy")
	tests := []struct {
		name       string
		closed     *countingBody // a body that must have been closed once
		responses  []func(*http.Request) (*http.Response, error)
		wantErr    string // "" for a response
		wantStatus int
		wantCalls  int
	}{
		{
			name:   "nil, nil on the retry",
			closed: first,
			responses: []func(*http.Request) (*http.Response, error){
				func(r *http.Request) (*http.Response, error) {
					resp := response(r, 503, "")
					resp.Body = first
					return resp, nil
				},
				func(*http.Request) (*http.Response, error) { return nil, nil },
			},
			wantErr: "httpretry: GET: 2 attempts: final: httpretry: httpretry.roundTripFunc returned a nil response and a nil error", wantCalls: 2,
		},
		{
			name: "nil Body on a 503 is empty and retried",
			responses: []func(*http.Request) (*http.Response, error){
				func(r *http.Request) (*http.Response, error) { return &http.Response{StatusCode: 503, Request: r}, nil },
				func(r *http.Request) (*http.Response, error) { return response(r, 200, "ok"), nil },
			},
			wantStatus: 200, wantCalls: 2,
		},
		{
			name: "nil Body, unknown length",
			responses: []func(*http.Request) (*http.Response, error){
				func(r *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 200, ContentLength: -1, Request: r}, nil
				},
			},
			wantStatus: 200, wantCalls: 1,
		},
		{
			name: "no Header on a 503",
			responses: []func(*http.Request) (*http.Response, error){
				func(r *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
				},
			},
			wantStatus: 503, wantCalls: 3,
		},
		{
			name: "no Request on a 409",
			responses: []func(*http.Request) (*http.Response, error){
				func(*http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 409, Body: http.NoBody}, nil
				},
			},
			wantStatus: 409, wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			calls := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				f := tt.responses[min(calls, len(tt.responses)-1)]
				calls++
				return f(r)
			})
			fc := clockwork.NewFakeClock()
			tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Timeout: time.Minute, AttemptTimeout: time.Second}
			req := newRequest(t, context.Background(), "GET", "http://api.test/", nil)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if tt.wantErr != "" {
				var e *Error
				if !errors.As(err, &e) || e.Error() != tt.wantErr {
					t.Errorf("err = %v; want a *Error %q", err, tt.wantErr)
				}
			} else if err != nil || resp.StatusCode != tt.wantStatus {
				t.Errorf("got %v, %v; want a %d", resp, err, tt.wantStatus)
			}
			if resp != nil {
				readBody(t, resp)
			}
			if calls != tt.wantCalls {
				t.Errorf("Base called %d times; want %d", calls, tt.wantCalls)
			}
			if tt.closed != nil && tt.closed.closes() != 1 {
				t.Errorf("the 503 before the broken retry was closed %d times; want 1", tt.closed.closes())
			}
		})
	}
}

// TestStartClockReadsOnlyTheMonotonicClockOfTheSystem: without a Clock of
// its own, a Transport reads an attempt's start as an offset from the
// process's start, its time left zero and made from the offset when
// needed; the time since it is measured from the same offset. With a
// Clock, the start is the clock's time and the elapsed time the clock's.
func TestStartClockReadsOnlyTheMonotonicClockOfTheSystem(t *testing.T) {
	t.Parallel()
	before := time.Now()
	start, since := (&Transport{}).startClock(clockwork.NewRealClock())
	if !start.IsZero() || since <= 0 {
		t.Fatalf("system clock: start %v, offset %v; want a zero start and a positive offset", start, since)
	}
	at := startAt(start, since)
	if at.Before(before) || !at.Equal(processStart.Add(since)) {
		t.Errorf("startAt = %v; want processStart plus the offset, not before %v", at, before)
	}
	if el := (&Transport{}).elapsedSince(clockwork.NewRealClock(), start, since); el < 0 || el > time.Since(before) {
		t.Errorf("elapsed since the start = %v; want between 0 and %v", el, time.Since(before))
	}
	fc := clockwork.NewFakeClock()
	tr := &Transport{Clock: fc}
	start, since = tr.startClock(fc)
	if !start.Equal(fc.Now()) || since != 0 || !startAt(start, since).Equal(fc.Now()) {
		t.Fatalf("own clock: start %v, offset %v; want the clock's %v and none", start, since, fc.Now())
	}
	fc.Advance(3 * time.Second)
	if el := tr.elapsedSince(fc, start, since); el != 3*time.Second {
		t.Errorf("own clock: elapsed %v; want 3s, the clock's", el)
	}
}
