package httptestutil_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/httptestutil"
)

// trackedBody is a request body that records whether it was read to the
// end and closed, and signals the end, so a test knows RoundTrip got past
// reading it.
type trackedBody struct {
	r      io.Reader
	eof    chan struct{}
	once   sync.Once
	mu     sync.Mutex
	closed bool
}

func newTrackedBody(s string) *trackedBody {
	return &trackedBody{r: strings.NewReader(s), eof: make(chan struct{})}
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.once.Do(func() { close(b.eof) })
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

func (b *trackedBody) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// roundTrip runs tr.RoundTrip in a goroutine, so a test can move the fake
// clock while it waits.
func roundTrip(tr *httptestutil.Transport, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		ch <- result{resp, err}
	}()
	return ch
}

type result struct {
	resp *http.Response
	err  error
}

// blockUntil waits until n timers wait on clock, failing the test after
// five seconds rather than hanging it.
func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
}

func newRequest(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestTransportRespond(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		step       httptestutil.Step
		wantStatus string
		wantHeader http.Header
	}{
		{"zero step", httptestutil.Step{}, "200 OK", http.Header{}},
		{
			"status, headers and body",
			httptestutil.Step{Status: 503, Header: http.Header{"X-Test": {"a"}}, Body: "busy", RetryAfter: "2"},
			"503 Service Unavailable",
			http.Header{"X-Test": {"a"}, "Retry-After": {"2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A fake clock nobody advances: a step without Delay must not wait.
			tr := httptestutil.NewTransport(clockwork.NewFakeClock(), tc.step)
			req := newRequest(t, t.Context(), http.MethodGet, "http://example.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != tc.step.Body {
				t.Errorf("body: got %q, %v; want %q", body, err, tc.step.Body)
			}
			if resp.Status != tc.wantStatus || resp.Proto != "HTTP/1.1" || resp.Request != req ||
				resp.ContentLength != int64(len(tc.step.Body)) {
				t.Errorf("response: got %q %q length %d", resp.Status, resp.Proto, resp.ContentLength)
			}
			for k := range tc.wantHeader {
				if got, want := resp.Header.Get(k), tc.wantHeader.Get(k); got != want {
					t.Errorf("header %s: got %q, want %q", k, got, want)
				}
			}
			if len(resp.Header) != len(tc.wantHeader) {
				t.Errorf("header: got %v, want %v", resp.Header, tc.wantHeader)
			}
		})
	}
}

// TestTransportErrors checks the error steps through an http.Client, which
// wraps them in *url.Error, as the code under test will see them.
func TestTransportErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		step  httptestutil.Step
		wants []error
	}{
		{"refused", httptestutil.Step{Err: httptestutil.ErrRefused},
			[]error{httptestutil.ErrRefused, syscall.ECONNREFUSED}},
		{"reset", httptestutil.Step{Err: httptestutil.ErrReset},
			[]error{httptestutil.ErrReset, syscall.ECONNRESET}},
		{"Err wins over the action", httptestutil.Step{Action: httptestutil.Trickle, Err: io.ErrUnexpectedEOF},
			[]error{io.ErrUnexpectedEOF}},
		{"close conn", httptestutil.Step{Action: httptestutil.CloseConn}, []error{io.EOF}},
		{"unknown action", httptestutil.Step{Action: 99}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := httptestutil.NewTransport(clockwork.NewFakeClock(), tc.step)
			resp, err := (&http.Client{Transport: tr}).Get("http://example.test/")
			if err == nil {
				resp.Body.Close()
				t.Fatal("got no error")
			}
			for _, want := range tc.wants {
				if !errors.Is(err, want) {
					t.Errorf("errors.Is(%v, %v): got false, want true", err, want)
				}
			}
			if got := tr.Hits(); got != 1 {
				t.Errorf("Hits: got %d, want 1", got)
			}
			if got := len(tr.Responses()); got != 0 {
				t.Errorf("Responses: got %d, want 0", got)
			}
		})
	}
}

func TestTransportDelay(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	tr := httptestutil.NewTransport(clock, httptestutil.Step{Body: "late", Delay: time.Second})
	res := roundTrip(tr, newRequest(t, t.Context(), http.MethodGet, "http://example.test/", nil))

	blockUntil(t, clock, 1)
	clock.Advance(time.Second - time.Nanosecond)
	select {
	case r := <-res:
		t.Fatalf("answered before its Delay: %v", r.err)
	default:
	}
	clock.Advance(time.Nanosecond)
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if got := tr.Hits(); got != 1 {
		t.Errorf("Hits: got %d, want 1", got)
	}
}

// TestTransportWaitsEnd checks that a cancelled request ends a Delay or a
// Hang, and that neither leaves a timer on the clock.
func TestTransportWaitsEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		step    httptestutil.Step
		waiters int // clock waiters while the request waits
	}{
		{"delay", httptestutil.Step{Delay: time.Hour}, 1},
		{"hang", httptestutil.Step{Action: httptestutil.Hang}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			tr := httptestutil.NewTransport(clock, tc.step)
			ctx, cancel := context.WithCancel(t.Context())
			body := newTrackedBody("payload")
			res := roundTrip(tr, newRequest(t, ctx, http.MethodPut, "http://example.test/", body))
			<-body.eof
			blockUntil(t, clock, tc.waiters)
			cancel()
			if r := <-res; !errors.Is(r.err, context.Canceled) {
				t.Errorf("RoundTrip: got %v, want context.Canceled", r.err)
			}
			blockUntil(t, clock, 0)
			if got := tr.Hits(); got != 1 {
				t.Errorf("Hits: got %d, want 1", got)
			}
			if !body.isClosed() {
				t.Error("request body not closed")
			}
		})
	}
}

func TestTransportCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	tr := httptestutil.NewTransport(clockwork.NewFakeClock())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	body := newTrackedBody("payload")
	_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "http://example.test/", body))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip: got %v, want context.Canceled", err)
	}
	if got := tr.Hits(); got != 0 {
		t.Errorf("Hits: got %d, want 0: the request never left", got)
	}
	if !body.isClosed() {
		t.Error("request body not closed")
	}
}

func TestTransportNilClockIsReal(t *testing.T) {
	t.Parallel()
	tr := httptestutil.NewTransport(nil, httptestutil.Step{Body: "ok", Delay: time.Nanosecond})
	resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodGet, "http://example.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status: got %d, want 200", resp.StatusCode)
	}
}
