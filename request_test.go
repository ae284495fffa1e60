package httpretry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/httpretry/httpretry/httptestutil"
)

// TestKeyOnRequestWithNilHeader: a request built by hand may have a nil
// Header; generating its idempotency key must not panic, and the key goes
// out on every attempt.
func TestKeyOnRequestWithNilHeader(t *testing.T) {
	t.Parallel()
	base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	tr := &Transport{Base: base, Jitter: noJitter, NewIdempotencyKey: func() string { return "k-1" }}
	req := newRequest(t, context.Background(), "POST", "http://api.test/orders", strings.NewReader("{}"))
	req.Header = nil
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	reqs := base.Requests()
	if len(reqs) != 2 {
		t.Fatalf("hits %d; want 2", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get(IdempotencyKeyHeader); got != "k-1" {
			t.Errorf("attempt %d carried key %q; want k-1", i+1, got)
		}
	}
	if req.Header != nil {
		t.Errorf("the caller's request was modified: Header %v", req.Header)
	}
}

// valueBody is a request body of a type that is not comparable (it holds
// a slice): comparing two interface values holding it panics.
type valueBody struct {
	r    *bytes.Reader
	tags []string
}

// Tags makes tags used; its slice is what makes the type not comparable.
func (b valueBody) Tags() []string { return b.tags }

func (b valueBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b valueBody) Close() error               { return nil }

// TestNonComparableBody: a body whose type is not comparable must not
// make RoundTrip panic, whatever way the body is sent.
func TestNonComparableBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		getBody bool
		length  int64
	}{
		{"with GetBody", true, 2},
		{"buffered", false, 2},
		{"streamed", false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 200})
			tr := &Transport{Base: base}
			req := newRequest(t, context.Background(), "PUT", "http://api.test/", nil)
			req.Body, req.ContentLength = valueBody{r: bytes.NewReader([]byte("{}"))}, tc.length
			if tc.getBody {
				req.GetBody = func() (io.ReadCloser, error) {
					return valueBody{r: bytes.NewReader([]byte("{}"))}, nil
				}
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := string(base.Requests()[0].Body); got != "{}" {
				t.Errorf("sent %q; want {}", got)
			}
		})
	}
}

// TestOneAttemptSendsCallerBodyAsIs: with a single attempt nothing is sent
// again, so the caller's body goes to Base untouched, neither buffered nor
// wrapped.
func TestOneAttemptSendsCallerBodyAsIs(t *testing.T) {
	t.Parallel()
	body := newCountingBody("payload")
	var got io.ReadCloser
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Body
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return response(r, 200, ""), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 1}
	req := newRequest(t, context.Background(), "POST", "http://api.test/", nil)
	req.Body, req.ContentLength = body, 7
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got != io.ReadCloser(body) {
		t.Errorf("Base got %T; want the caller's body", got)
	}
	if n := body.closes(); n != 1 {
		t.Errorf("body closed %d times; want once, by Base", n)
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
