package httpretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedirectDialErrorKeepsPostUnrepeatable: with a Base built on
// http.Client, a POST that was applied and answered 303, whose redirected
// GET then fails to dial, must not be treated as never sent: the dial
// error belongs to the GET. One POST reaches the server, and the outcome
// is unknown.
func TestRedirectDialErrorKeepsPostUnrepeatable(t *testing.T) {
	t.Parallel()
	dead, err := closedAddr()
	if err != nil {
		t.Fatal(err)
	}
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, "http://"+dead+"/orders/1", http.StatusSeeOther)
	}))
	defer srv.Close()
	client := &http.Client{Transport: srv.Client().Transport}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.RequestURI = ""
		return client.Do(r)
	})
	tr := &Transport{Base: base, Jitter: noJitter, Budget: Unlimited}
	req := newRequest(t, context.Background(), "POST", srv.URL+"/orders", strings.NewReader(`{"book":"b1"}`))
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		t.Fatalf("got a %d response; want an error", resp.StatusCode)
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != NotIdempotent || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v; want not_idempotent and ErrOutcomeUnknown", err)
	}
	if got := posts.Load(); got != 1 {
		t.Errorf("the POST was applied %d times; want 1", got)
	}
}

// TestNeverSentOutermostError: only the attempt's outermost error, or the
// error a *url.Error naming this very request wraps, proves that nothing
// was sent.
func TestNeverSentOutermostError(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest("POST", "http://api.test/orders", nil)
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a dial error", dial, true},
		{"http.Client's wrapping of this request", &url.Error{Op: "Post", URL: "http://api.test/orders", Err: dial}, true},
		{"a redirect's dial error", &url.Error{Op: "Get", URL: "http://other.test/orders/1", Err: dial}, false},
		{"same URL, other method", &url.Error{Op: "Get", URL: "http://api.test/orders", Err: dial}, false},
		{"a dial error deep in a chain", errors.Join(errors.New("proxy"), dial), false},
		{"a read error", &net.OpError{Op: "read", Err: errors.New("reset")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := neverSent(req, tt.err); got != tt.want {
				t.Errorf("neverSent(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestUnconnectedAttemptIsNotOutcomeUnknown: when an attempt's time runs
// out while its connection is still being dialed (a black-holed address,
// a full accept queue), net/http reports only the context's error. The
// connection trace shows that the attempt never got a connection, so a
// POST is retried like after a dial error, and its failure is not
// "outcome unknown". A control: a POST whose server read it and then
// hung is reported unknown after one attempt.
func TestUnconnectedAttemptIsNotOutcomeUnknown(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	blackHole := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			dials.Add(1)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
	defer blackHole.CloseIdleConnections()
	tr := &Transport{Base: blackHole, AttemptTimeout: 50 * time.Millisecond, Timeout: 10 * time.Second,
		Jitter: noJitter, Budget: Unlimited}
	req := newRequest(t, context.Background(), "POST", "http://api.test/orders", strings.NewReader("{}"))
	_, err := tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) || e.Reason != AttemptsExhausted || e.Attempts != 3 {
		t.Fatalf("err = %v; want attempts_exhausted after 3 attempts", err)
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("err = %v; nothing was sent, the outcome is known", err)
	}
	if got := dials.Load(); got != 3 {
		t.Errorf("%d dials; want 3", got)
	}

	// The control: the request reached the server.
	var hits atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	tr = &Transport{Base: srv.Client().Transport, AttemptTimeout: 50 * time.Millisecond, Timeout: 10 * time.Second,
		Jitter: noJitter, Budget: Unlimited}
	req = newRequest(t, context.Background(), "POST", srv.URL+"/orders", strings.NewReader("{}"))
	_, err = tr.RoundTrip(req)
	if !errors.As(err, &e) || e.Reason != NotIdempotent || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v; want not_idempotent and ErrOutcomeUnknown", err)
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("%d hits; want 1", got)
	}
}
