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

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
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
	if !e.Unknown {
		t.Error("Outcome.Unknown is false; want true, as the error says")
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
	realTime(t)
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
	if errors.Is(err, ErrOutcomeUnknown) || e.Unknown {
		t.Errorf("err = %v; nothing was sent, the outcome is known", err)
	}
	if got := dials.Load(); got != 3 {
		t.Errorf("%d dials; want 3", got)
	}

	// The control: the request reached the server, and only then does the
	// attempt's time run out (on a fake clock, so that the verdict does
	// not depend on how fast a loaded machine serves it).
	var hits atomic.Int32
	reached, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		select {
		case reached <- struct{}{}:
		default: // a second request: the test fails on hits
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	fc := clockwork.NewFakeClock()
	tr = &Transport{Base: srv.Client().Transport, Clock: fc, AttemptTimeout: 50 * time.Millisecond, Timeout: 10 * time.Second,
		Jitter: noJitter, Budget: Unlimited}
	req = newRequest(t, context.Background(), "POST", srv.URL+"/orders", strings.NewReader("{}"))
	ch := start(tr, req)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the server")
	}
	advance(t, fc, 2, 50*time.Millisecond) // the operation's Timeout and the attempt's limit
	r := await(t, ch)
	if !errors.As(r.err, &e) || e.Reason != NotIdempotent || !errors.Is(r.err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v; want not_idempotent and ErrOutcomeUnknown", r.err)
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("%d hits; want 1", got)
	}
}

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
