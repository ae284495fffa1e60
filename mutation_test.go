package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// The tests in this file pin down boundaries that mutation testing found
// no other test deciding.

func TestOutcomeAloneIsTimed(t *testing.T) {
	t.Parallel()
	// Only WithOutcome observes the operation: no hook, logger or deadline.
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(50 * ms)}
	var o Outcome
	ch := start(tr, newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 50*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if o.Elapsed != 50*ms || o.Waited != 50*ms {
		t.Errorf("outcome = %+v; want Elapsed and Waited of 50ms", o)
	}
}

func TestRetryBodyNeverTouchesCallerRequest(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Jitter: noJitter}
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", strings.NewReader("payload"))
	body := req.Body
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if req.Body != body {
		t.Error("a retry's fresh body was put on the caller's request")
	}
	for i, r := range base.Requests() {
		if string(r.Body) != "payload" {
			t.Errorf("attempt %d sent %q", i+1, r.Body)
		}
	}
}

func TestExactlyMinAttemptTimeLeftRetries(t *testing.T) {
	t.Parallel()
	// The 503 arrives at 200ms of a 300ms operation: exactly
	// MinAttemptTime (100ms) is left, which is enough for a retry with no
	// wait; a millisecond later it is not.
	for _, tc := range []struct {
		latency  time.Duration
		wantHits int
	}{{200 * ms, 2}, {201 * ms, 1}} {
		fc := clockwork.NewFakeClock()
		base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503, Delay: tc.latency}, httptestutil.Step{Status: 200})
		tr := &Transport{Base: base, Clock: fc, Timeout: 300 * ms, Jitter: noJitter}
		ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		advance(t, fc, 2, tc.latency)
		r := await(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		readBody(t, r.resp)
		if base.Hits() != tc.wantHits {
			t.Errorf("503 after %v: hits = %d; want %d", tc.latency, base.Hits(), tc.wantHits)
		}
	}
}

func TestNoTimeLeftStopsEvenWithoutWait(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	ctx, cancel := clockwork.WithTimeout(context.Background(), fc, 50*ms)
	defer cancel()
	var o Outcome
	resp, err := (&Transport{Base: base, Clock: fc, Jitter: noJitter}).RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if base.Hits() != 1 || o.Reason != DeadlineExhausted {
		t.Errorf("hits %d, outcome %+v; want 1 attempt, deadline_exhausted", base.Hits(), o)
	}
}

func TestDrainLimitBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		size     int
		known    bool
		wantRead int
	}{
		{"known, exactly the limit, drained", drainLimit, true, drainLimit},
		{"known, one byte over, closed unread", drainLimit + 1, true, 0},
		{"unknown length, far over, read up to the limit", 4 * drainLimit, false, drainLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var first *countingReader
			calls := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				calls++
				resp := response(r, 200, "")
				if calls == 1 {
					resp.StatusCode = 503
					first = &countingReader{r: strings.NewReader(strings.Repeat("x", tt.size))}
					resp.Body = first
					resp.ContentLength = -1
					if tt.known {
						resp.ContentLength = int64(tt.size)
					}
				}
				return resp, nil
			})
			resp, err := (&Transport{Base: base, Jitter: noJitter}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if first.n != tt.wantRead || !first.closed {
				t.Errorf("drain read %d bytes (closed %v); want %d and closed", first.n, first.closed, tt.wantRead)
			}
		})
	}
}

func TestBodyWrapperReleasesOnlyAtEOF(t *testing.T) {
	t.Parallel()
	var attemptCtx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attemptCtx = r.Context()
		return response(r, 200, "payload"), nil
	})
	resp, err := (&Transport{Base: base, AttemptTimeout: time.Minute}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		t.Fatal(err)
	}
	if done(attemptCtx) {
		t.Fatal("attempt context ended after a partial read")
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if !done(attemptCtx) {
		t.Error("attempt context still live at EOF")
	}
}

func TestTimeoutOnlyWithEmptyBody(t *testing.T) {
	t.Parallel()
	var ctx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		ctx = r.Context()
		resp := response(r, 204, "")
		resp.Body = http.NoBody
		return resp, nil
	})
	resp, err := (&Transport{Base: base, Timeout: time.Minute}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != http.NoBody || !done(ctx) {
		t.Errorf("Body %T, context done %v; want NoBody kept and the operation's context released at once", resp.Body, done(ctx))
	}
}

// panicBudget is a Budget whose Deposit panics.
type panicBudget struct{}

func (panicBudget) Deposit()                      { panic("budget broke") }
func (panicBudget) Withdraw(context.Context) bool { return true }
func (panicBudget) Refund()                       {}

func TestCallerBodyClosedWhenACallbackPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tr   *Transport
	}{
		{"NewIdempotencyKey panics", &Transport{NewIdempotencyKey: func() string { panic("no entropy") }}},
		{"Budget.Deposit panics", &Transport{Budget: panicBudget{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.tr.Base = httptestutil.NewTransport(nil)
			body := newCountingBody("x")
			req := newRequest(t, context.Background(), "POST", "http://api.test/", nil)
			req.Body = body
			req.GetBody = func() (io.ReadCloser, error) { return newCountingBody("x"), nil }
			func() {
				defer func() { _ = recover() }()
				tc.tr.RoundTrip(req)
				t.Error("RoundTrip did not panic")
			}()
			if body.closes() != 1 {
				t.Errorf("caller's body closed %d times; want 1", body.closes())
			}
		})
	}
}

func TestOnDoneAloneIsTimed(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, Jitter: waits(30 * ms), OnDone: log.onDone}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advance(t, fc, 1, 30*ms)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if len(log.done) != 1 || log.done[0].Elapsed != 30*ms {
		t.Errorf("OnDone got %+v; want one outcome with Elapsed 30ms", log.done)
	}
}

func TestOutcomeFilledOnFirstSuccess(t *testing.T) {
	t.Parallel()
	var o Outcome
	resp, err := (&Transport{Base: httptestutil.NewTransport(nil)}).RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if o.Attempts != 1 || o.Reason != Final || o.Status != 200 {
		t.Errorf("outcome = %+v; want 1 attempt, final, 200", o)
	}
}

func TestLogNamesTheURLHost(t *testing.T) {
	t.Parallel()
	h := &captureHandler{}
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
	req := newRequest(t, context.Background(), "GET", "http://10.0.0.7:8080/v1/x", nil)
	req.Host = "virtual.example" // the Host header may differ from where the request goes
	resp, err := (&Transport{Base: base, Jitter: noJitter, Logger: slog.New(h)}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if len(h.records) == 0 || attrs(h.records[0])["host"] != "10.0.0.7:8080" {
		t.Errorf("records %v; want host 10.0.0.7:8080", h.records)
	}
}

func TestCanceledKeepsContextErrorInChain(t *testing.T) {
	t.Parallel()
	// A Base that reports cancellation in its own words.
	ctx, cancel := context.WithCancel(context.Background())
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		cancel()
		return nil, errors.New("transport: request aborted")
	})
	_, err := (&Transport{Base: base}).RoundTrip(newRequest(t, ctx, "GET", "http://api.test/", nil))
	var e *Error
	if !errors.As(err, &e) || e.Reason != Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; want canceled, matching context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "request aborted") {
		t.Errorf("err = %v; want the attempt's own error kept", err)
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

func TestNoKeyGeneratedWithoutRetries(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil)
	tr := &Transport{Base: base, MaxAttempts: 1, NewIdempotencyKey: RandomKey}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "POST", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := base.Requests()[0].Header.Get(IdempotencyKeyHeader); got != "" {
		t.Errorf("key %q sent though no retry is possible", got)
	}
}

func TestBufferResponseShortBody(t *testing.T) {
	t.Parallel()
	// The response announces 5 bytes and sends none: a broken body, retried.
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			resp := response(r, 200, "")
			resp.ContentLength = 5
			return resp, nil
		}
		return response(r, 200, "hello"), nil
	})
	var log attemptLog
	resp, err := (&Transport{Base: base, BufferResponse: 1 << 10, Jitter: noJitter, OnAttempt: log.onAttempt}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "hello" || calls != 2 {
		t.Errorf("body %q after %d calls; want hello after 2", got, calls)
	}
	if !errors.Is(log.attempts[0].Err, io.ErrUnexpectedEOF) {
		t.Errorf("first attempt's error = %v; want io.ErrUnexpectedEOF", log.attempts[0].Err)
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

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
