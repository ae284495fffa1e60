package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTimeoutEndsAnAttemptWhoseBodyReadIsBlocked: Timeout bounds the
// operation even while Base (net/http over HTTP/1.1, which waits for a
// body write before RoundTrip returns) is blocked in a Read of the
// caller's body: a pipe that gives two bytes and then nothing. At the
// deadline the body is closed under the Read, RoundTrip returns the
// deadline's error, and the body is closed exactly once — for a body of
// unknown length (sent once, through the tracker), one with GetBody (the
// caller's body on the first attempt) and a single attempt (the caller's
// body as it is). OnAttempt reports the one attempt with the deadline's
// error.
func TestTimeoutEndsAnAttemptWhoseBodyReadIsBlocked(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	for _, kind := range []string{"unknown length", "with GetBody", "one attempt"} {
		t.Run(kind, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte("he")) // two bytes, then Read blocks
			body := &closeCountingBody{r: pr}
			var attemptErrs []error
			tr := &Transport{Base: base, Timeout: 30 * time.Millisecond,
				OnAttempt: func(_ *http.Request, a Attempt) { attemptErrs = append(attemptErrs, a.Err) }}
			req := newRequest(t, context.Background(), "PUT", srv.URL, body)
			req.ContentLength = -1
			switch kind {
			case "with GetBody":
				req.ContentLength = 5
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
			case "one attempt":
				tr.MaxAttempts = 1
			}
			var r result
			select {
			case r = <-start(tr, req):
			case <-time.After(hangGuardBody):
				pw.Close()
				t.Fatalf("RoundTrip still running %v after its 30ms Timeout", hangGuardBody)
			}
			if r.err == nil {
				r.resp.Body.Close()
			}
			if !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("err = %v; want the deadline", r.err)
			}
			// The attempt's own error names the deadline too, not only
			// the closed body's error that Base returned.
			if len(attemptErrs) != 1 || !errors.Is(attemptErrs[0], context.DeadlineExceeded) {
				t.Errorf("attempts reported errors %v; want one, the deadline's", attemptErrs)
			}
			// Base may close the body from its own goroutine just after
			// RoundTrip returned (net/http's contract allows it): wait
			// for that close, then count.
			for end := time.Now().Add(hangGuardBody); body.closes.Load() == 0 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if got := body.closes.Load(); got != 1 {
				t.Errorf("body closed %d times; want once", got)
			}
		})
	}
}

// hangGuardBody bounds how long a test waits for what must happen at
// once, or for a server that waits for the test: it fails, under its own
// name, where a wait without a bound would hang the package until its
// timeout. Here it fails only when RoundTrip waits for the stalled body
// itself.
const hangGuardBody = 10 * time.Second

// TestAttemptCutUnderABlockedBodyReadReportsTheDeadline: a Base that
// reads the request body and returns the Read's error (not the context's)
// when the body is closed under it at the attempt's deadline: the
// attempt is reported, and RoundTrip fails, with the deadline's error,
// the closed body's kept in the message.
func TestAttemptCutUnderABlockedBodyReadReportsTheDeadline(t *testing.T) {
	t.Parallel()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, err := io.ReadAll(r.Body)
		return nil, fmt.Errorf("reading the request body: %w", err)
	})
	pr, pw := io.Pipe()
	defer pw.Close()
	var attemptErrs []error
	tr := &Transport{Base: base, Timeout: 20 * time.Millisecond, MaxAttempts: 1,
		OnAttempt: func(_ *http.Request, a Attempt) { attemptErrs = append(attemptErrs, a.Err) }}
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", &closeCountingBody{r: pr})
	req.ContentLength = -1
	var r result
	select {
	case r = <-start(tr, req):
	case <-time.After(hangGuardBody):
		pw.Close()
		t.Fatalf("RoundTrip still running %v after its 20ms Timeout", hangGuardBody)
	}
	if !errors.Is(r.err, context.DeadlineExceeded) || !strings.Contains(r.err.Error(), "request body closed under a blocked read") {
		t.Errorf("err = %v; want the deadline, naming the closed body", r.err)
	}
	if len(attemptErrs) != 1 || !errors.Is(attemptErrs[0], context.DeadlineExceeded) {
		t.Errorf("attempts reported errors %v; want one, the deadline's", attemptErrs)
	}
}
