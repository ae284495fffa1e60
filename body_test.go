package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// TestRequestBodies checks that every attempt sends the whole body, from
// GetBody or from the buffered copy, that unrewindable bodies are sent
// once, and that the caller's body is closed exactly once.
func TestRequestBodies(t *testing.T) {
	t.Parallel()
	const payload = `{"book":"b1","qty":2}`
	tests := []struct {
		name       string
		method     string
		body       func() (io.Reader, *countingBody)
		length     int64 // ContentLength to set; -2 keeps what NewRequest set
		buffer     int64
		wantHits   int
		wantReason StopReason
	}{
		{name: "GetBody from bytes.Reader", method: "PUT",
			body:   func() (io.Reader, *countingBody) { return bytes.NewReader([]byte(payload)), nil },
			length: -2, wantHits: 3, wantReason: AttemptsExhausted},
		{name: "known length buffered", method: "PUT",
			body:   func() (io.Reader, *countingBody) { b := newCountingBody(payload); return b, b },
			length: int64(len(payload)), wantHits: 3, wantReason: AttemptsExhausted},
		{name: "exactly BufferRequest is buffered", method: "PUT", buffer: int64(len(payload)),
			body:   func() (io.Reader, *countingBody) { b := newCountingBody(payload); return b, b },
			length: int64(len(payload)), wantHits: 3, wantReason: AttemptsExhausted},
		{name: "one byte over BufferRequest is sent once", method: "PUT", buffer: int64(len(payload)) - 1,
			body:   func() (io.Reader, *countingBody) { b := newCountingBody(payload); return b, b },
			length: int64(len(payload)), wantHits: 1, wantReason: BodyNotRewindable},
		{name: "unknown length is sent once", method: "PUT",
			body:   func() (io.Reader, *countingBody) { b := newCountingBody(payload); return b, b },
			length: -1, wantHits: 1, wantReason: BodyNotRewindable},
		{name: "buffering disabled", method: "PUT", buffer: -1,
			body:   func() (io.Reader, *countingBody) { b := newCountingBody(payload); return b, b },
			length: int64(len(payload)), wantHits: 1, wantReason: BodyNotRewindable},
		{name: "keyed POST with GetBody", method: "POST",
			body:   func() (io.Reader, *countingBody) { return strings.NewReader(payload), nil },
			length: -2, wantHits: 3, wantReason: AttemptsExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
			tr := &Transport{Base: base, Clock: fc, BufferRequest: tt.buffer, Jitter: noJitter}
			r, counting := tt.body()
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), tt.method, "http://api.test/orders", r)
			if tt.length != -2 {
				req.ContentLength = tt.length
			}
			if counting != nil {
				req.Body = counting // no GetBody
				req.GetBody = nil
			}
			if tt.method == "POST" {
				req.Header.Set(IdempotencyKeyHeader, "order-7281")
			}
			res := await(t, start(tr, req))
			if res.err != nil {
				t.Fatal(res.err)
			}
			readBody(t, res.resp)
			if base.Hits() != tt.wantHits || o.Reason != tt.wantReason {
				t.Errorf("hits %d, reason %s; want %d, %s", base.Hits(), o.Reason, tt.wantHits, tt.wantReason)
			}
			for i, got := range base.Requests() {
				if string(got.Body) != payload {
					t.Errorf("attempt %d sent body %q; want %q", i+1, got.Body, payload)
				}
				if tt.method == "POST" && got.Header.Get(IdempotencyKeyHeader) != "order-7281" {
					t.Errorf("attempt %d sent key %q", i+1, got.Header.Get(IdempotencyKeyHeader))
				}
			}
			if counting != nil && counting.closes() != 1 {
				t.Errorf("caller's body closed %d times; want 1", counting.closes())
			}
		})
	}
}

func TestShortBodyIsAnErrorBeforeAnyAttempt(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc)
	tr := &Transport{Base: base, Clock: fc}
	body := newCountingBody("12345")
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", nil)
	req.Body, req.ContentLength = body, 10
	_, err := tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 0 || !errors.Is(err, errShortBody) {
		t.Fatalf("err = %v; want *Error with 0 attempts wrapping errShortBody", err)
	}
	if base.Hits() != 0 || body.closes() != 1 {
		t.Errorf("hits %d, body closes %d; want 0 and 1", base.Hits(), body.closes())
	}
}

func TestBodyReadErrorIsReported(t *testing.T) {
	t.Parallel()
	tr := &Transport{Base: httptestutil.NewTransport(nil)}
	boom := errors.New("disk gone")
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", nil)
	req.Body, req.ContentLength = io.NopCloser(iotest.ErrReader(boom)), 10
	if _, err := tr.RoundTrip(req); !errors.Is(err, boom) {
		t.Fatalf("err = %v; want it to wrap %v", err, boom)
	}
}

func TestGetBodyFailureStopsWithResponse(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503})
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter}
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	var o Outcome
	req = req.WithContext(WithOutcome(req.Context(), &o))
	res := await(t, start(tr, req))
	if res.err != nil || res.resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the 503", res.resp, res.err)
	}
	readBody(t, res.resp)
	if o.Reason != BodyNotRewindable || base.Hits() != 1 {
		t.Errorf("outcome %+v, hits %d; want body_not_rewindable after 1", o, base.Hits())
	}
}

// TestFreshBodyClosedWhenRetryStops: GetBody is asked for the next body
// before the rules that need the clock, and the budget, decide; when they
// stop the retry, the fresh body is closed once and never sent.
func TestFreshBodyClosedWhenRetryStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		step   httptestutil.Step
		budget Budget
		want   StopReason
	}{
		{"retry_after_exceeds_deadline", httptestutil.Step{Status: 503, RetryAfter: "3600"}, Unlimited, RetryAfterExceedsDeadline},
		{"budget_exhausted", httptestutil.Step{Status: 503}, NewTokenBucket(0, 0), BudgetExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, tt.step)
			tr := &Transport{Base: base, Clock: fc, Timeout: time.Second, Budget: tt.budget, Jitter: noJitter}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://api.test/", strings.NewReader("x"))
			var fresh []*countingBody
			req.GetBody = func() (io.ReadCloser, error) {
				b := newCountingBody("x")
				fresh = append(fresh, b)
				return b, nil
			}
			res := await(t, start(tr, req))
			if res.err != nil {
				t.Fatalf("RoundTrip error: %v", res.err)
			}
			readBody(t, res.resp)
			if o.Reason != tt.want || base.Hits() != 1 {
				t.Errorf("outcome %+v, hits %d; want %s after 1", o, base.Hits(), tt.want)
			}
			if len(fresh) != 1 || fresh[0].closes() != 1 {
				t.Fatalf("GetBody gave %d bodies; want 1, closed once", len(fresh))
			}
		})
	}
}

// TestUnreadBodyRewoundAfterDialError: a body without GetBody is sent again
// when the previous attempt never read it (the connection was refused).
func TestUnreadBodyRewoundAfterDialError(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls < 3 {
			r.Body.Close() // as net/http does, without reading
			return nil, errRefused
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		got = append(got, string(b))
		return response(r, 201, ""), nil
	})
	body := newCountingBody("stream")
	tr := &Transport{Base: base, Jitter: noJitter}
	req := newRequest(t, context.Background(), "POST", "http://api.test/", nil)
	req.Body, req.ContentLength = body, -1
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if calls != 3 || len(got) != 1 || got[0] != "stream" || body.closes() != 1 {
		t.Errorf("calls %d, bodies %q, closes %d; want 3 calls, the whole body once, 1 close", calls, got, body.closes())
	}
}

func TestCallerRequestNotModified(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, AttemptTimeout: 5 * ms * 1000,
		NewIdempotencyKey: func() string { return "generated-1" }}
	ctx := context.Background()
	req := newRequest(t, ctx, "POST", "http://api.test/orders", strings.NewReader("x"))
	req.Header.Set("X-Trace", "t1")
	body, getBody := req.Body, req.GetBody
	res := await(t, start(tr, req))
	if res.err != nil {
		t.Fatal(res.err)
	}
	readBody(t, res.resp)
	if len(req.Header) != 1 || req.Header.Get("X-Trace") != "t1" || req.Body != body ||
		req.Context() != ctx || req.GetBody == nil || getBody == nil {
		t.Errorf("caller's request was modified: header %v", req.Header)
	}
	for i, r := range base.Requests() {
		if r.Header.Get(IdempotencyKeyHeader) != "generated-1" || r.Header.Get("X-Trace") != "t1" {
			t.Errorf("attempt %d headers %v; want the generated key and X-Trace", i+1, r.Header)
		}
	}
}

func TestDrainBeforeWaitAndReturnUnread(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	big := strings.Repeat("x", drainLimit+1)
	base := httptestutil.NewTransport(fc,
		httptestutil.Step{Status: 503, Body: "small error"},
		httptestutil.Step{Status: 500, Body: big},
		httptestutil.Step{Status: 502, Body: "last"},
	)
	tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, Budget: Unlimited}
	res := await(t, start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil)))
	if res.err != nil {
		t.Fatal(res.err)
	}
	if base.BodyRead(0) != int64(len("small error")) || !base.BodyClosed(0) {
		t.Errorf("small body read %d, closed %v; want drained and closed", base.BodyRead(0), base.BodyClosed(0))
	}
	if base.BodyRead(1) != 0 || !base.BodyClosed(1) {
		t.Errorf("oversized body read %d, closed %v; want closed unread", base.BodyRead(1), base.BodyClosed(1))
	}
	if base.BodyRead(2) != 0 || base.BodyClosed(2) {
		t.Errorf("returned body read %d, closed %v; want untouched", base.BodyRead(2), base.BodyClosed(2))
	}
	if got := readBody(t, res.resp); got != "last" {
		t.Errorf("body = %q", got)
	}
}

// TestDerivedContextLivesWithBody: with Timeout or AttemptTimeout the
// returned body stays readable, and its contexts end on Close or EOF.
func TestDerivedContextLivesWithBody(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"close", "eof"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			var attemptCtx context.Context
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				attemptCtx = r.Context()
				return response(r, 200, "payload"), nil
			})
			tr := &Transport{Base: base, Timeout: 10e9, AttemptTimeout: 5e9}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if done(attemptCtx) {
				t.Fatal("attempt context ended before the body was read")
			}
			if end == "close" {
				resp.Body.Close()
			} else {
				b, _ := io.ReadAll(resp.Body)
				if string(b) != "payload" {
					t.Errorf("body = %q", b)
				}
			}
			if !done(attemptCtx) {
				t.Errorf("attempt context still live after %s", end)
			}
			resp.Body.Close()
		})
	}
}

func TestNoWrapperWithoutDerivedContext(t *testing.T) {
	t.Parallel()
	inner := io.NopCloser(strings.NewReader("x"))
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp := response(r, 200, "")
		resp.Body = inner
		return resp, nil
	})
	resp, err := (&Transport{Base: base}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != inner {
		t.Errorf("Body was wrapped though no context was derived")
	}
}

// rwBody is a writable body, like the one net/http returns with a 101.
type rwBody struct {
	r       io.Reader
	written bytes.Buffer
}

func (b *rwBody) Read(p []byte) (int, error)  { return b.r.Read(p) }
func (*rwBody) Close() error                  { return nil }
func (b *rwBody) Write(p []byte) (int, error) { return b.written.Write(p) }

func TestSwitchingProtocolsKeepsWritableBody(t *testing.T) {
	t.Parallel()
	conn := &rwBody{r: strings.NewReader("")}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 101, Header: http.Header{}, Body: conn, Request: r}, nil
	})
	tr := &Transport{Base: base, AttemptTimeout: 5e9}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/ws", nil))
	if err != nil {
		t.Fatal(err)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body %T is not an io.ReadWriteCloser", resp.Body)
	}
	if _, err := rw.Write([]byte("ping")); err != nil || conn.written.String() != "ping" {
		t.Errorf("write through the body: %v, got %q", err, conn.written.String())
	}
	rw.Close()
}

// panicBudget is a Budget whose Deposit panics.
type panicBudget struct{}

func (panicBudget) Deposit() { panic("budget broke") }

func (panicBudget) Withdraw(context.Context) bool { return true }

func (panicBudget) Refund() {}

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

// TestBufferRequestNeverExceeded: a body of known length up to
// BufferRequest is read into memory before the first attempt and sent
// again; one byte more is never read ahead, is streamed once, and stops
// the operation with body_not_rewindable. A body longer than its
// ContentLength is TestBodyLongerThanContentLength's.
func TestBufferRequestNeverExceeded(t *testing.T) {
	t.Parallel()
	const limit = 1024
	tests := []struct {
		name       string
		size       int // bytes in the body
		length     int64
		wantAhead  int64 // bytes read before the first attempt reached Base
		wantHits   int
		wantReason StopReason
	}{
		{"exactly the limit is buffered", limit, limit, limit, 3, AttemptsExhausted},
		{"one byte over is streamed once", limit + 1, limit + 1, 0, 1, BodyNotRewindable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptestutil.NewServer(httptestutil.Step{Status: 503})
			defer srv.Close()
			body := &hostileReqBody{r: io.LimitReader(zeroReader{}, int64(tt.size))}
			var ahead atomic.Int64
			ahead.Store(-1)
			inner := srv.Client().Transport.(*http.Transport).Clone()
			defer inner.CloseIdleConnections()
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				ahead.CompareAndSwap(-1, body.read.Load())
				return inner.RoundTrip(r)
			})
			tr := &Transport{Base: base, BufferRequest: limit, Jitter: noJitter}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", srv.URL+"/upload", nil)
			req.Body, req.ContentLength = body, tt.length
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := ahead.Load(); got != tt.wantAhead {
				t.Errorf("%d bytes read before the first attempt; want %d", got, tt.wantAhead)
			}
			if got := body.read.Load(); got > max(tt.length, 0) {
				t.Errorf("%d bytes read from the body in all; want ≤ its length %d", got, tt.length)
			}
			if srv.Hits() != tt.wantHits || o.Reason != tt.wantReason {
				t.Errorf("hits %d, reason %s; want %d, %s", srv.Hits(), o.Reason, tt.wantHits, tt.wantReason)
			}
			for i, q := range srv.Requests() {
				if int64(len(q.Body)) != tt.length {
					t.Errorf("attempt %d sent %d bytes; want %d", i+1, len(q.Body), tt.length)
				}
			}
		})
	}
}

// TestBodyLongerThanContentLength: a buffered body with more bytes than
// its ContentLength is an error, as http.Transport makes it, and nothing
// is sent: sending the first ContentLength bytes would truncate the
// request silently.
func TestBodyLongerThanContentLength(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		size   int64
		length int64
		want   string
	}{
		{"six bytes more", 10, 4, "ContentLength=4 with Body length 10"},
		{"a lying length over a huge body", hostileBody, 1024, "ContentLength=1024 with Body length 2048"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 200})
			tr := &Transport{Base: base, BufferRequest: 1024, Jitter: noJitter}
			body := &hostileReqBody{r: io.LimitReader(zeroReader{}, tt.size)}
			req := newRequest(t, context.Background(), "PUT", "http://api.test/upload", nil)
			req.Body, req.ContentLength = body, tt.length
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				t.Fatalf("got a %d response; want an error", resp.StatusCode)
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want a *Error saying %q", err, tt.want)
			}
			if e.Attempts != 0 || e.Reason != Final || base.Hits() != 0 {
				t.Errorf("attempts %d, reason %s, hits %d; want 0, final, 0", e.Attempts, e.Reason, base.Hits())
			}
			if got := body.read.Load(); got > tt.length+1024 {
				t.Errorf("read %d bytes; want at most the length and BufferRequest more (%d)", got, tt.length+1024)
			}
		})
	}
}

// TestBodyNotRewindableSaysHowLarge: an upload that cannot be sent again
// (over BufferRequest, without GetBody) stops with body_not_rewindable,
// and the Outcome and the error say how large the body was, never what
// it held.
func TestBodyNotRewindableSaysHowLarge(t *testing.T) {
	t.Parallel()
	const size = 2 << 20 // 2 MiB: over the 1 MiB default
	for _, tc := range []struct {
		name   string
		length int64
	}{
		{"known length", size},
		{"unknown length", -1},
		// An outgoing request with a body and ContentLength 0 has a body
		// of unknown length, as net/http reads it.
		{"zero length with a body", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := httptestutil.NewTransport(nil, httptestutil.Step{Err: httptestutil.ErrReset})
			tr := &Transport{Base: base, Jitter: noJitter}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://api.test/objects/o1", nil)
			req.Body = io.NopCloser(io.LimitReader(zeroReader{}, size))
			req.ContentLength = tc.length
			_, err := tr.RoundTrip(req)
			if o.Reason != BodyNotRewindable || o.BodySize != size {
				t.Errorf("outcome %+v; want body_not_rewindable with BodySize %d", o, size)
			}
			if want := "a request body of 2097152 bytes without GetBody cannot be sent again"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v; want it to say %q", err, want)
			}
		})
	}
}

// onceClosingBody is a stalled request body that counts its Closes: like
// many real bodies, it must not be closed twice.
type onceClosingBody struct {
	closedCh chan struct{}
	closes   atomic.Int32
}

func (b *onceClosingBody) Read([]byte) (int, error) {
	<-b.closedCh
	return 0, errors.New("read on closed body")
}

func (b *onceClosingBody) Close() error {
	if b.closes.Add(1) == 1 {
		close(b.closedCh)
	}
	return nil
}

// TestCallerBodyClosedOnce: a body of known length that stalls while the
// Transport buffers it is interrupted by Timeout by closing it; it is then
// not closed a second time.
func TestCallerBodyClosedOnce(t *testing.T) {
	realTime(t)
	body := &onceClosingBody{closedCh: make(chan struct{})}
	base := httptestutil.NewTransport(nil)
	tr := &Transport{Base: base, Timeout: 100 * time.Millisecond}
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", body)
	req.ContentLength = 10
	var o Outcome
	req = req.WithContext(WithOutcome(req.Context(), &o))
	_, err := tr.RoundTrip(req)
	if err == nil || o.Reason != DeadlineExhausted {
		t.Fatalf("err %v, reason %q; want the Timeout to end buffering with deadline_exhausted", err, o.Reason)
	}
	if got := body.closes.Load(); got != 1 {
		t.Errorf("the caller's body was closed %d times; want once", got)
	}
	if base.Hits() != 0 {
		t.Errorf("base saw %d requests; want none", base.Hits())
	}
}

// TestRetryOfARequestWithGetBodySendsTheWholeBodyAgain: a PUT made by
// http.NewRequest (which sets GetBody) is answered 503 by a Base that
// read its body: the retry carries the whole body again, from GetBody,
// not the body the first attempt read (over net/http's Transport, which
// rewinds a body through GetBody itself when a write finds it short, the
// server alone would not tell).
func TestRetryOfARequestWithGetBodySendsTheWholeBodyAgain(t *testing.T) {
	t.Parallel()
	var got []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		got = append(got, string(b))
		status := http.StatusOK
		if len(got) == 1 {
			status = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond}
	req, err := http.NewRequest(http.MethodPut, "http://api.test/doc", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(got) != 2 || got[0] != "payload" || got[1] != "payload" {
		t.Errorf("status %d, bodies Base read %q; want 200 and the whole body twice", resp.StatusCode, got)
	}
}
