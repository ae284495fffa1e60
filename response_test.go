package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
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
