package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// The tests in this file hold the Transport to its bounds against servers
// and Bases that misbehave: huge or endless error bodies, request bodies
// one byte over a limit, credentials in every part of a request, and Bases
// that break the RoundTripper contract.

// hostileBody is 10 MiB: far over every limit the Transport has.
const hostileBody = 10 << 20

// countingConn counts the bytes the client read from a connection: what
// the Transport and net/http actually consumed, whatever the server sent
// into the socket's buffers.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// hostileDialer is a client transport that counts, per connection, the
// bytes read from it.
type hostileDialer struct {
	mu    sync.Mutex
	conns []*atomic.Int64
}

func (d *hostileDialer) transport() *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		n := new(atomic.Int64)
		d.mu.Lock()
		d.conns = append(d.conns, n)
		d.mu.Unlock()
		return countingConn{c, n}, nil
	}}
}

func (d *hostileDialer) reads() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int64, len(d.conns))
	for i, n := range d.conns {
		out[i] = n.Load()
	}
	return out
}

// TestDrainBoundedAgainstHugeErrorBody: a 503 with a 10 MiB body, with a
// Content-Length (closed unread) or without one (drained up to
// drainLimit, then closed). Over loopback, the bytes the client read from
// the discarded response's connection stay within the drain limit plus
// net/http's read buffer; in memory, the drain reads exactly drainLimit.
func TestDrainBoundedAgainstHugeErrorBody(t *testing.T) {
	t.Parallel()
	// overhead is what net/http reads beyond the body the drain asked
	// for: its 4 KiB bufio.Reader, the response head and chunk headers.
	const overhead = 8 << 10
	for _, tc := range []struct {
		name    string
		chunked bool
		min     int64 // the drain must have read at least this much
	}{
		{"with Content-Length", false, 0},
		// Well past what net/http buffers by itself, so the drain did
		// read; not all of drainLimit, which its 200ms real-time bound
		// could cut short on a loaded machine.
		{"chunked, no length", true, 16 << 10},
	} {
		t.Run("loopback "+tc.name, func(t *testing.T) {
			t.Parallel()
			var wrote atomic.Int64
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				if !tc.chunked {
					w.Header().Set("Content-Length", fmt.Sprint(hostileBody))
				}
				w.WriteHeader(503)
				chunk := bytes.Repeat([]byte("x"), 32<<10)
				for range hostileBody / len(chunk) {
					n, err := w.Write(chunk)
					wrote.Add(int64(n))
					if err != nil {
						return // the client closed the connection
					}
				}
			}))
			defer srv.Close()
			var d hostileDialer
			base := d.transport()
			defer base.CloseIdleConnections()
			tr := &Transport{Base: base, Jitter: noJitter}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := readBody(t, resp); got != "ok" {
				t.Fatalf("body = %q; want the retry's", got)
			}
			reads := d.reads()
			if len(reads) != 2 {
				t.Fatalf("%d connections; want 2 (the drained one cannot be reused)", len(reads))
			}
			if got := reads[0]; got > drainLimit+overhead || got < tc.min {
				t.Errorf("read %d bytes of the 10 MiB error body's connection; want %d to %d", got, tc.min, drainLimit+overhead)
			}
			t.Logf("server wrote %d bytes into the socket; the client read %d", wrote.Load(), reads[0])
		})
	}
	t.Run("in memory, unknown length", func(t *testing.T) {
		t.Parallel()
		bodies := []*hostileRespBody{{size: hostileBody}, {size: 2}}
		calls := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b := bodies[calls]
			calls++
			status := 503
			if calls > 1 {
				status = 200
			}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: b, ContentLength: -1, Request: r}, nil
		})
		tr := &Transport{Base: base, Jitter: noJitter}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if got := bodies[0].read.Load(); got != drainLimit || !bodies[0].closed.Load() {
			t.Errorf("drain read %d bytes, closed %v; want exactly drainLimit (%d), closed", got, bodies[0].closed.Load(), drainLimit)
		}
	})
}

// hostileRespBody is a response body of size bytes that counts what was
// read from it.
type hostileRespBody struct {
	size   int64
	read   atomic.Int64
	closed atomic.Bool
}

func (b *hostileRespBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("read after close")
	}
	left := b.size - b.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), left))
	clear(p[:n])
	b.read.Add(int64(n))
	return n, nil
}

func (b *hostileRespBody) Close() error { b.closed.Store(true); return nil }

// hostileReqBody is a request body without GetBody that records how much
// was read from it and by whom: before Base got the request (the
// Transport buffering it) or after.
type hostileReqBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *hostileReqBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *hostileReqBody) Close() error { return nil }

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

// zeroReader reads zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestBufferResponseNeverExceeded is issue 3 §1's bound on BufferResponse:
// a response one byte over the limit is not held in memory (a known
// length is not read at all; an unknown one is read one byte past the
// limit, to find out), the bytes read are put back in front, and nothing
// is lost.
func TestBufferResponseNeverExceeded(t *testing.T) {
	t.Parallel()
	const limit = 1024
	for _, tc := range []struct {
		name     string
		size     int64
		length   int64 // ContentLength: -1 for unknown
		buffered bool
	}{
		{"exactly the limit, known length", limit, limit, true},
		{"exactly the limit, unknown length", limit, -1, true},
		{"one byte over, known length", limit + 1, limit + 1, false},
		{"one byte over, unknown length", limit + 1, -1, false},
		{"10 MiB, unknown length", hostileBody, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := &hostileRespBody{size: tc.size}
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: body, ContentLength: tc.length, Request: r}, nil
			})
			tr := &Transport{Base: base, BufferResponse: limit}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			// What the Transport read before returning is what it holds.
			got := body.read.Load()
			switch {
			case tc.buffered && got != tc.size:
				t.Errorf("the Transport read %d bytes before returning; want all %d, buffered", got, tc.size)
			case tc.length > limit && got != 0:
				t.Errorf("the Transport read %d bytes of a body declared over the limit; want none", got)
			case got > limit+1:
				t.Errorf("the Transport read %d bytes before returning; want ≤ %d", got, limit+1)
			}
			if tc.buffered && resp.ContentLength != tc.size {
				t.Errorf("buffered response ContentLength %d; want %d", resp.ContentLength, tc.size)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n != tc.size {
				t.Errorf("caller read %d bytes, err %v; want all %d", n, err, tc.size)
			}
		})
	}
}

// The secrets of TestNoSecretsOverLoopback, each placed where a careless
// log or error would pick it up.
var hostileSecrets = []string{
	"hunter2",                 // URL userinfo password
	"alice",                   // URL userinfo user
	"s3cr3t-token",            // query string
	"Bearer abc.def",          // Authorization
	"session=xyz",             // Cookie
	"Basic cHJveHk=",          // Proxy-Authorization
	"set-cookie-value-qq7",    // a response header
	"response-body-secret-k9", // a response body
}

// TestNoSecretsOverLoopback is TestNoSecretsAnywhere on real sockets: real
// net/http errors (refused, reset, timed out) and real responses, over
// HTTP/1.1 and HTTP/2, through every hook, the Logger, WithOutcome and the
// returned error.
func TestNoSecretsOverLoopback(t *testing.T) {
	t.Parallel()
	secretResp := httptestutil.Step{Status: 503, Body: "response-body-secret-k9",
		Header: http.Header{"Set-Cookie": {"token=set-cookie-value-qq7"}}}
	tests := []struct {
		name   string
		h2     bool
		steps  []httptestutil.Step // nil: a closed port
		method string
	}{
		{"retried then 503", false, []httptestutil.Step{secretResp}, "GET"},
		{"retried then 200", false, []httptestutil.Step{secretResp, {Body: "response-body-secret-k9"}}, "GET"},
		{"connection closed", false, []httptestutil.Step{{Action: httptestutil.CloseConn}}, "GET"},
		{"POST reset, outcome unknown", false, []httptestutil.Step{{Action: httptestutil.CloseConn}}, "POST"},
		{"attempts time out", false, []httptestutil.Step{{Action: httptestutil.Hang}}, "GET"},
		{"refused", false, nil, "GET"},
		{"h2 retried then 503", true, []httptestutil.Step{secretResp}, "GET"},
		{"h2 stream reset", true, []httptestutil.Step{{Action: httptestutil.CloseConn}}, "GET"},
		{"h2 refused", true, nil, "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				srv  *httptestutil.Server
				base = &http.Transport{ForceAttemptHTTP2: tt.h2}
				host string
			)
			switch {
			case tt.steps == nil:
				addr, err := closedAddr()
				if err != nil {
					t.Fatal(err)
				}
				host = addr
			case tt.h2:
				srv = httptestutil.NewTLSServer(tt.steps...)
			default:
				srv = httptestutil.NewServer(tt.steps...)
			}
			if srv != nil {
				defer srv.Close()
				base = srv.Client().Transport.(*http.Transport).Clone()
				base.ForceAttemptHTTP2 = tt.h2
				host = srv.Listener.Addr().String()
			}
			defer base.CloseIdleConnections()
			scheme := "http"
			if tt.h2 {
				scheme = "https"
			}

			var logs bytes.Buffer
			var hooks strings.Builder
			var mu sync.Mutex
			record := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(&hooks, format+"\n", args...)
			}
			tr := &Transport{Base: base, Timeout: 2 * time.Second, AttemptTimeout: 100 * ms, BaseDelay: ms, Jitter: noJitter,
				Logger: slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
				OnAttempt: func(r *http.Request, a Attempt) {
					record("attempt %+v %v", a, a.Err)
				},
				OnDone: func(r *http.Request, o Outcome) { record("done %+v %v", o, o.Err) },
			}
			var body io.Reader
			if tt.method == "POST" {
				body = strings.NewReader(`{"card":"4242"}`)
			}
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), tt.method,
				scheme+"://alice:hunter2@"+host+"/v1/books?api_key=s3cr3t-token", body)
			req.Header.Set("Authorization", "Bearer abc.def")
			req.Header.Set("Cookie", "session=xyz")
			req.Header.Set("Proxy-Authorization", "Basic cHJveHk=")
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				readBody(t, resp)
			}

			seen := []string{logs.String(), hooks.String(), fmt.Sprintf("%+v", o), fmt.Sprint(o.Err)}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v; want a *Error", err)
				}
				seen = append(seen, err.Error(), fmt.Sprintf("%+v", e), fmt.Sprint(errors.Unwrap(err)))
			}
			all := strings.Join(seen, "\n")
			for _, s := range hostileSecrets {
				if strings.Contains(all, s) {
					t.Errorf("secret %q leaked in:\n%s", s, all)
				}
			}
			// The test can fail: the secrets went out, and the records came.
			if srv != nil {
				q := srv.Requests()[0]
				if q.Header.Get("Authorization") != "Bearer abc.def" || q.RawQuery != "api_key=s3cr3t-token" {
					t.Errorf("the server saw %v ?%s; want the credentials sent", q.Header, q.RawQuery)
				}
			}
			if o.Attempts < 2 && o.Reason != NotIdempotent && o.Reason != Final {
				t.Errorf("outcome %+v; want a retried operation", o)
			}
			// Only a first-attempt final stop (the HTTP/2 stream reset,
			// see TestFaultMatrix) leaves no log record.
			logged := o.Reason != Final || o.Attempts > 1
			if logged && !strings.Contains(logs.String(), `"path":"/v1/books"`) || !strings.Contains(hooks.String(), "done") {
				t.Errorf("logs %q, hooks %q; want records carrying the path", logs.String(), hooks.String())
			}
		})
	}
}

// lockedWriter serializes writes from concurrent log handlers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
