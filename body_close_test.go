package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// The RoundTripper contract: RoundTrip closes the request body on every
// path, errors included. When RoundTrip returns before any attempt took
// the body, the body is closed by then, exactly once: a caller handing
// over a file or a pipe may reuse or count it as soon as RoundTrip
// returns.

// closeCountingBody is a request body that counts its Close calls and
// reads from r; closing it closes r when r is a pipe, as closing a file
// or a connection interrupts a Read blocked on it.
type closeCountingBody struct {
	r      io.Reader
	closes atomic.Int32
}

func (b *closeCountingBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *closeCountingBody) Close() error {
	b.closes.Add(1)
	if c, ok := b.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// errBodyRead is the Read error of a body that fails.
var errBodyRead = errors.New("disk read failed")

// failingReader fails every Read.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errBodyRead }

// TestCallerBodyClosedOnEveryEarlyReturn: for each way RoundTrip can end
// before any attempt takes the caller's body — the deadline spent before
// or while the body is buffered, the caller's context or Request.Cancel
// ended, a body shorter or longer than its ContentLength, a body whose
// Read fails, a destination whose quota is spent — the body has been
// closed exactly once when RoundTrip returns, and nothing was sent.
func TestCallerBodyClosedOnEveryEarlyReturn(t *testing.T) {
	t.Parallel()
	spentQuota := func(t *testing.T) *throttle.Throttle {
		// A 429 announcing that the quota is spent for a minute: the
		// next operation to the same host is refused before it starts.
		th := &throttle.Throttle{}
		tr := &Transport{MaxAttempts: 1, Throttle: th, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{"Ratelimit": {`"default";r=0;t=60`}}
			return &http.Response{StatusCode: 429, Header: h, Body: http.NoBody, Request: r}, nil
		})}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return th
	}
	tests := []struct {
		name   string
		body   func() io.Reader // what the body reads
		length int64            // its ContentLength; -1: unknown
		tr     func(t *testing.T, tr *Transport)
		req    func(req *http.Request) *http.Request
		reason StopReason
		errIs  error
		text   string // in the error's message
	}{
		{
			name: "deadline spent before the body is buffered",
			body: func() io.Reader { return strings.NewReader("hello") }, length: 5,
			tr:     func(_ *testing.T, tr *Transport) { tr.Timeout = time.Nanosecond },
			reason: DeadlineExhausted, errIs: context.DeadlineExceeded,
			text: "PUT: 0 attempts: deadline_exhausted",
		},
		{
			name: "deadline spent while the body is buffered",
			body: func() io.Reader { r, _ := io.Pipe(); return r }, length: 5,
			tr:     func(_ *testing.T, tr *Transport) { tr.Timeout = 20 * time.Millisecond },
			reason: DeadlineExhausted, errIs: context.DeadlineExceeded,
			text: "reading request body: context deadline exceeded",
		},
		{
			name: "caller's context canceled before RoundTrip",
			body: func() io.Reader { return strings.NewReader("hello") }, length: 5,
			req: func(req *http.Request) *http.Request {
				ctx, cancel := context.WithCancel(req.Context())
				cancel()
				return req.WithContext(ctx)
			},
			reason: Canceled, errIs: context.Canceled,
		},
		{
			name: "Request.Cancel closed while the body is buffered",
			body: func() io.Reader { r, _ := io.Pipe(); return r }, length: 5,
			req: func(req *http.Request) *http.Request {
				ch := make(chan struct{})
				close(ch)
				//lint:ignore SA1019 the deprecated channel still ends an operation
				req.Cancel = ch
				return req
			},
			reason: Canceled,
		},
		{
			name: "body shorter than its ContentLength",
			body: func() io.Reader { return strings.NewReader("hel") }, length: 5,
			reason: Final, errIs: errShortBody,
		},
		{
			name: "body longer than its ContentLength",
			body: func() io.Reader { return strings.NewReader("hello, world") }, length: 5,
			reason: Final, text: "ContentLength=5 with Body length 12",
		},
		{
			name: "body whose Read fails",
			body: func() io.Reader { return failingReader{} }, length: 5,
			reason: Final, errIs: errBodyRead,
		},
		{
			name: "quota spent: refused before the body is read",
			body: func() io.Reader { return strings.NewReader("hello") }, length: 5,
			tr:     func(t *testing.T, tr *Transport) { tr.Throttle = spentQuota(t) },
			reason: Throttled, errIs: throttle.ErrQuotaExhausted,
		},
		{
			name: "quota spent, body of unknown length",
			body: func() io.Reader { return strings.NewReader("hello") }, length: -1,
			tr:     func(t *testing.T, tr *Transport) { tr.Throttle = spentQuota(t) },
			reason: Throttled, errIs: throttle.ErrQuotaExhausted,
		},
		{
			name: "caller cancels while waiting for a spent quota's reset",
			body: func() io.Reader { return strings.NewReader("hello") }, length: 5,
			tr: func(t *testing.T, tr *Transport) {
				tr.Throttle = spentQuota(t)
				tr.Throttle.WaitQuota = true
				tr.MaxRetryAfter = 2 * time.Minute
			},
			req: func(req *http.Request) *http.Request {
				ctx, cancel := context.WithCancel(req.Context())
				time.AfterFunc(20*time.Millisecond, cancel)
				return req.WithContext(ctx)
			},
			reason: Canceled, errIs: throttle.ErrQuotaExhausted,
		},
		{
			name: "quota spent, one attempt: the body would go to Base as it is",
			body: func() io.Reader { return strings.NewReader("hello") }, length: 5,
			tr: func(t *testing.T, tr *Transport) {
				tr.Throttle, tr.MaxAttempts = spentQuota(t), 1
			},
			reason: Throttled, errIs: throttle.ErrQuotaExhausted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				hits.Add(1)
				return response(r, 200, "ok"), nil
			})}
			if tt.tr != nil {
				tt.tr(t, tr)
			}
			body := &closeCountingBody{r: tt.body()}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://api.test/", body)
			req.ContentLength = tt.length
			if tt.req != nil {
				req = tt.req(req)
			}
			resp, err := tr.RoundTrip(req)
			if got := body.closes.Load(); got != 1 {
				t.Errorf("the caller's body was closed %d times when RoundTrip returned; want exactly once", got)
			}
			if err == nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip succeeded (%d); want it to end before any attempt", resp.StatusCode)
			}
			if o.Attempts != 0 || hits.Load() != 0 || o.Reason != tt.reason {
				t.Errorf("%d attempts, %d sent, reason %q; want 0, 0, %q", o.Attempts, hits.Load(), o.Reason, tt.reason)
			}
			if tt.errIs != nil && !errors.Is(err, tt.errIs) {
				t.Errorf("err = %v; want it to match %v", err, tt.errIs)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %q; want it to contain %q", err, tt.text)
			}
			time.Sleep(time.Millisecond) // a late close, if any, would land now
			if got := body.closes.Load(); got != 1 {
				t.Errorf("the caller's body was closed %d times in all; want exactly once", got)
			}
		})
	}
}

// blockingCloseBody is a body whose Read blocks until released, whatever
// Close does, and whose Close takes until it is released too: a slow
// device, or a file system that flushes on close.
type blockingCloseBody struct {
	readRelease  chan struct{}
	closeEntered chan struct{}
	closeRelease chan struct{}
	closes       atomic.Int32
}

func (b *blockingCloseBody) Read([]byte) (int, error) {
	<-b.readRelease
	return 0, io.ErrClosedPipe
}

func (b *blockingCloseBody) Close() error {
	close(b.closeEntered)
	<-b.closeRelease
	b.closes.Add(1)
	return nil
}

// TestCallerBodyClosedBeforeRoundTripReturnsWhenTheDeadlineEndsBuffering:
// when Timeout ends the buffering of a body, the close it starts runs on
// a goroutine of its own, and RoundTrip returns only once that Close has
// returned, however long it takes; the body is closed exactly once.
func TestCallerBodyClosedBeforeRoundTripReturnsWhenTheDeadlineEndsBuffering(t *testing.T) {
	realTime(t)
	t.Parallel()
	body := &blockingCloseBody{readRelease: make(chan struct{}), closeEntered: make(chan struct{}), closeRelease: make(chan struct{})}
	tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Error("an attempt was sent")
		return response(r, 200, "ok"), nil
	}), Timeout: 20 * time.Millisecond}
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", body)
	req.ContentLength = 5
	ch := start(tr, req)
	<-body.closeEntered // the deadline passed and the close began
	close(body.readRelease)
	select {
	case r := <-ch:
		t.Fatalf("RoundTrip returned (%v) while the body's Close was still running", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(body.closeRelease)
	r := <-ch
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want the deadline", r.err)
	}
	if got := body.closes.Load(); got != 1 {
		t.Errorf("the caller's body was closed %d times when RoundTrip returned; want once", got)
	}
}

// TestCallerBodyClosedExactlyOnceWhenTheDeadlineIsSpentOnALoopbackServer:
// over a real loopback server, with every kind of body (buffered, with
// GetBody, of unknown length, sent as it is with one attempt, hedged),
// a Timeout spent before the first attempt ends the operation, and the
// body is closed exactly once: by RoundTrip when no attempt took it, by
// Base (which may close it on a goroutine of its own, after its
// RoundTrip returned) when one did.
func TestCallerBodyClosedExactlyOnceWhenTheDeadlineIsSpentOnALoopbackServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tests := []struct {
		name    string
		length  int64
		getBody bool
		tr      func() *Transport
	}{
		{name: "buffered", length: 5, tr: func() *Transport { return &Transport{} }},
		{name: "with GetBody", length: 5, getBody: true, tr: func() *Transport { return &Transport{} }},
		{name: "unknown length", length: -1, tr: func() *Transport { return &Transport{} }},
		{name: "one attempt", length: 5, tr: func() *Transport { return &Transport{MaxAttempts: 1} }},
		{name: "larger than BufferRequest", length: 5, tr: func() *Transport { return &Transport{BufferRequest: 4} }},
		{name: "hedged", length: 5, tr: func() *Transport { return &Transport{Hedging: &Hedging{Delay: time.Millisecond}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := tt.tr()
			tr.Base, tr.Timeout = base, time.Nanosecond
			body := &closeCountingBody{r: strings.NewReader("hello")}
			req := newRequest(t, context.Background(), "PUT", srv.URL, body)
			req.ContentLength = tt.length
			if tt.getBody {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
			}
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip succeeded (%d) with its Timeout spent", resp.StatusCode)
			}
			var e *Error
			if !errors.As(err, &e) || e.Attempts > 1 {
				t.Fatalf("err = %v; want a *Error after at most one attempt", err)
			}
			if e.Attempts == 0 {
				if got := body.closes.Load(); got != 1 {
					t.Errorf("no attempt took the body, and it was closed %d times when RoundTrip returned; want once", got)
				}
			}
			// Base may close the body it took after its RoundTrip returned.
			for end := time.Now().Add(5 * time.Second); body.closes.Load() == 0 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond)
			if got := body.closes.Load(); got != 1 {
				t.Errorf("the caller's body was closed %d times after %d attempts; want exactly once", got, e.Attempts)
			}
		})
	}
}

// TestCallerBodyClosedWhenBaseClosesItAfterTheRetryWasRefused: a PUT
// whose body cannot be rewound (no GetBody, no length) is answered 503
// with Retry-After: 60 by a Base that did not read the body and closes
// it only after RoundTrip returned, as the RoundTripper contract allows.
// The retry, planned past the operation's 1-second Timeout, is refused
// after the body was set aside for it: no attempt will send it again,
// so Base's late Close closes the caller's body, exactly once.
func TestCallerBodyClosedWhenBaseClosesItAfterTheRetryWasRefused(t *testing.T) {
	t.Parallel()
	body := &closeCountingBody{r: strings.NewReader("payload")}
	var held io.Closer
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		held = r.Body
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"60"}},
			Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, Timeout: time.Second, MaxAttempts: 3}
	req := newRequest(t, context.Background(), http.MethodPut, "http://api.test/doc", body)
	req.ContentLength = -1
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("RoundTrip: %v, %v; want the 503", resp, err)
	}
	resp.Body.Close()
	if held == nil {
		t.Fatal("Base got no body")
	}
	held.Close()
	if n := body.closes.Load(); n != 1 {
		t.Errorf("caller's body closed %d times after Base's late Close; want 1", n)
	}
}
