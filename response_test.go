package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
)

func TestBufferResponseRetriesBrokenBody(t *testing.T) {
	t.Parallel()
	const full = `{"book":"b1","title":"A Long Title"}`
	base := httptestutil.NewTransport(nil,
		httptestutil.Step{Action: httptestutil.ResetBody, Body: full},
		httptestutil.Step{Action: httptestutil.ResetBody, Body: full},
		httptestutil.Step{Body: full},
	)
	tr := &Transport{Base: base, BufferResponse: 1 << 20, Jitter: noJitter}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/books/b1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != int64(len(full)) {
		t.Errorf("ContentLength = %d; want %d", resp.ContentLength, len(full))
	}
	if base.BodyRead(2) != int64(len(full)) || !base.BodyClosed(2) {
		t.Errorf("final body read %d, closed %v; want read whole and released before RoundTrip returned",
			base.BodyRead(2), base.BodyClosed(2))
	}
	if got := readBody(t, resp); got != full {
		t.Errorf("body = %q; want %q", got, full)
	}
	if o.Attempts != 3 || o.Reason != Final || base.OpenBodies() != 0 {
		t.Errorf("outcome %+v, open bodies %d; want 3 attempts, final, none open", o, base.OpenBodies())
	}
}

func TestWithoutBufferResponseBrokenBodyReachesCaller(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Action: httptestutil.ResetBody, Body: "0123456789"})
	resp, err := (&Transport{Base: base}).RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if string(b) != "01234" || !errors.Is(err, httptestutil.ErrReset) {
		t.Errorf("read %q, %v; want the first half and the reset", b, err)
	}
	if base.Hits() != 1 {
		t.Errorf("hits = %d; want 1: headers arrived, the attempt was over", base.Hits())
	}
}

func TestBufferResponseLimits(t *testing.T) {
	t.Parallel()
	const limit = 10
	tests := []struct {
		name         string
		body         string
		knownLength  bool
		wantBuffered bool
	}{
		{"known, under the limit", "0123", true, true},
		{"known, exactly the limit", "0123456789", true, true},
		{"known, one byte over", "0123456789A", true, false},
		{"unknown, under the limit", "0123", false, true},
		{"unknown, exactly the limit", "0123456789", false, true},
		{"unknown, one byte over", "0123456789A", false, false},
		{"unknown, far over", strings.Repeat("x", 5000), false, false},
		{"empty", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var inner *countingReader
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := response(r, 200, "")
				inner = &countingReader{r: strings.NewReader(tt.body)}
				resp.Body = inner
				resp.ContentLength = -1
				if tt.knownLength {
					resp.ContentLength = int64(len(tt.body))
				}
				return resp, nil
			})
			tr := &Transport{Base: base, BufferResponse: limit}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if inner.n > limit+1 {
				t.Errorf("read %d bytes before returning; want at most %d", inner.n, limit+1)
			}
			buffered := resp.ContentLength == int64(len(tt.body)) && inner.closed
			if buffered != tt.wantBuffered {
				t.Errorf("buffered = %v (ContentLength %d, closed %v); want %v", buffered, resp.ContentLength, inner.closed, tt.wantBuffered)
			}
			if got := readBody(t, resp); got != tt.body {
				t.Errorf("caller read %d bytes; want all %d, nothing lost", len(got), len(tt.body))
			}
		})
	}
}

// countingReader is a response body that counts the bytes read from it.
type countingReader struct {
	r      io.Reader
	n      int
	closed bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *countingReader) Close() error { c.closed = true; return nil }

// shortReader returns at most max bytes per Read, as a socket may.
type shortReader struct {
	r   io.Reader
	max int
}

func (s *shortReader) Read(p []byte) (int, error) {
	return s.r.Read(p[:min(len(p), s.max)])
}

// TestBufferResponseReadsToContentLength: a body of known length is
// returned to that length and no further, as net/http returns one, and
// read at most one byte past it, looking for its EOF; a body of unknown
// length is read to its end, through as many reads and growths of the
// buffer as it takes.
func TestBufferResponseReadsToContentLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 500) // 5000 bytes
	tests := []struct {
		name   string
		body   string
		length int64
		want   string
		read   int // bytes read from the body
	}{
		{"bytes past the length are not returned", "abcdef", 3, "abc", 4},
		{"a zero length returns nothing", "abc", 0, "", 1},
		{"the length, then EOF", "abc", 3, "abc", 3},
		{"unknown length, many reads", long, -1, long, len(long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inner := &countingReader{r: strings.NewReader(tt.body)}
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := response(r, 200, "")
				resp.Body, resp.ContentLength = inner, tt.length
				return resp, nil
			})
			tr := &Transport{Base: base, BufferResponse: 1 << 20}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if !inner.closed || resp.ContentLength != int64(len(tt.want)) {
				t.Errorf("closed %v, ContentLength %d; want buffered, %d", inner.closed, resp.ContentLength, len(tt.want))
			}
			if got := readBody(t, resp); got != tt.want || inner.n != tt.read {
				t.Errorf("caller read %d bytes, %d read from the body; want %d and %d", len(got), inner.n, len(tt.want), tt.read)
			}
		})
	}
}

func TestBufferResponseOnlyWhenRepeatable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		key    bool
		status int
		want   bool
	}{
		{"GET", "GET", false, 200, true},
		{"POST with key", "POST", true, 200, true},
		{"POST without key", "POST", false, 200, false},
		{"HEAD", "HEAD", false, 200, false},
		{"101", "GET", false, 101, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var inner *countingReader
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := response(r, tt.status, "")
				inner = &countingReader{r: strings.NewReader("payload")}
				resp.Body = inner
				resp.ContentLength = 7
				return resp, nil
			})
			req := newRequest(t, context.Background(), tt.method, "http://api.test/", nil)
			if tt.key {
				req.Header.Set(IdempotencyKeyHeader, "k")
			}
			resp, err := (&Transport{Base: base, BufferResponse: 1 << 10}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := inner.n == 7; got != tt.want {
				t.Errorf("buffered = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestBufferResponseTrickleOutlastsAttempt(t *testing.T) {
	realTime(t)
	t.Parallel()
	srv := httptestutil.NewServer(
		httptestutil.Step{Action: httptestutil.Trickle, Body: strings.Repeat("x", 100), Interval: 50 * ms},
		httptestutil.Step{Body: "complete"},
	)
	defer srv.Close()
	tr := &Transport{AttemptTimeout: 200 * ms, BufferResponse: 1 << 20, Jitter: noJitter}
	defer tr.CloseIdleConnections()
	var log attemptLog
	tr.OnAttempt = log.onAttempt
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "complete" {
		t.Errorf("body = %q", got)
	}
	if srv.Hits() != 2 || len(log.attempts) != 2 || !errors.Is(log.attempts[0].Err, ErrAttemptTimeout) {
		t.Errorf("hits %d, attempts %+v; want the trickle timed out and retried", srv.Hits(), log.attempts)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("took %v; the trickle must be cut at the 200ms attempt limit", elapsed)
	}
}

func TestBufferedResponseReleasesContextsAtOnce(t *testing.T) {
	t.Parallel()
	var attemptCtx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attemptCtx = r.Context()
		return response(r, 200, "payload"), nil
	})
	tr := &Transport{Base: base, Timeout: time.Minute, AttemptTimeout: time.Minute, BufferResponse: 1 << 10}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !done(attemptCtx) {
		t.Error("attempt context still live though the body is in memory")
	}
	if got := readBody(t, resp); got != "payload" {
		t.Errorf("body = %q", got)
	}
}

// TestBufferResponseKeepsAnswerOfUnrewindableRequest: BufferResponse reads
// a response within its attempt only when the request can be sent again.
// A PUT with a streaming body whose 200 breaks midway must reach the
// caller as the 200 the server sent, with the read error on its body,
// not as body_not_rewindable without a status.
func TestBufferResponseKeepsAnswerOfUnrewindableRequest(t *testing.T) {
	t.Parallel()
	const full = `{"book":"b1","title":"A Long Title"}`
	base := httptestutil.NewTransport(nil, httptestutil.Step{Action: httptestutil.ResetBody, Body: full})
	tr := &Transport{Base: base, BufferResponse: 1 << 20, Jitter: noJitter}
	var o Outcome
	req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://api.test/books/b1", nil)
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader(`{"title":"x"}`)), -1
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("err = %v; want the server's 200", err)
	}
	defer resp.Body.Close()
	got, rerr := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || rerr == nil || !errors.Is(rerr, httptestutil.ErrReset) {
		t.Errorf("got %d, read %q, %v; want 200 and the reset on the body", resp.StatusCode, got, rerr)
	}
	if o.Reason != Final || o.Status != 200 || base.Hits() != 1 {
		t.Errorf("outcome %+v, hits %d; want final 200 after 1 hit", o, base.Hits())
	}
}

func TestDrainLimitBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		size     int
		known    bool
		wantRead int
		readSize int // bytes per Read at most; 0 for any
	}{
		{"known, exactly the limit, drained", drainLimit, true, drainLimit, 0},
		{"known, one byte over, closed unread", drainLimit + 1, true, 0, 0},
		{"unknown length, far over, read up to the limit", 4 * drainLimit, false, drainLimit, 0},
		// Short reads, as from a socket: the last read is cut to the
		// limit, not a byte over it.
		{"unknown length, short reads, exactly the limit", 4 * drainLimit, false, drainLimit, 1000},
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
					var body io.Reader = strings.NewReader(strings.Repeat("x", tt.size))
					if tt.readSize > 0 {
						body = &shortReader{r: body, max: tt.readSize}
					}
					first = &countingReader{r: body}
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

// TestBufferResponseNeverExceeded is BufferResponse's memory bound:
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

// TestBufferResponseKeepsTrailers: a buffered response keeps its trailers.
// HTTP/2 sends them after the last byte of data, also for a body whose
// Content-Length is known, and net/http fills Response.Trailer only when a
// Read reaches EOF; HTTP/1.1 sends them only with a chunked body.
func TestBufferResponseKeepsTrailers(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			srv := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "Checksum")
				if p.h2 {
					w.Header().Set("Content-Length", "5")
				}
				io.WriteString(w, "hello")
				w.Header().Set("Checksum", "abc123")
			}))
			tr := &Transport{Base: serverBase(t, srv), BufferResponse: 1 << 10}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if p.h2 && resp.ContentLength != 5 {
				t.Fatalf("ContentLength %d; want the server's 5", resp.ContentLength)
			}
			// Trailers must be there before the caller reads the buffered body.
			if got := resp.Trailer.Get("Checksum"); got != "abc123" {
				t.Errorf("trailer Checksum %q before reading; want abc123", got)
			}
			if got := readBody(t, resp); got != "hello" {
				t.Errorf("body %q; want hello", got)
			}
			if got := resp.Trailer.Get("Checksum"); got != "abc123" {
				t.Errorf("trailer Checksum %q after reading; want abc123", got)
			}
		})
	}
}
