package httpretry

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is what a RoundTrip running in another goroutine returned.
type result struct {
	resp *http.Response
	err  error
}

// start runs rt.RoundTrip(req) in a goroutine, as fake-clock tests must:
// the test then drives the clock while RoundTrip waits on it.
func start(rt http.RoundTripper, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		ch <- result{resp, err}
	}()
	return ch
}

// advance waits until the fake clock has at least n waiters, then moves
// it forward by d.
func advance(t *testing.T, fc *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
	fc.Advance(d)
}

// hitsCounter is a Base that counts the requests it has taken.
type hitsCounter interface{ Hits() int }

// advanceAt waits until base has taken n requests and the fake clock has
// at least waiters waiters, then moves the clock forward by d. A request
// that hangs registers no waiter of its own, so the hit count is what
// shows that it is in flight.
func advanceAt(t *testing.T, fc *clockwork.FakeClock, base hitsCounter, n, waiters int, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); base.Hits() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for request %d: base has %d", n, base.Hits())
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, waiters, d)
}

// await returns the result of a RoundTrip started with start, failing the
// test instead of hanging when it does not come.
func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip did not return")
		return result{}
	}
}

// waits returns a Jitter that draws the given waits in turn, repeating
// the last: the fixed jitter of the seed texts' worked examples.
func waits(ds ...time.Duration) func(time.Duration) time.Duration {
	var mu sync.Mutex
	i := 0
	return func(time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		d := ds[min(i, len(ds)-1)]
		i++
		return d
	}
}

// noJitter is a Jitter that never waits.
func noJitter(time.Duration) time.Duration { return 0 }

// newRequest builds a request, failing the test on error.
func newRequest(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// readBody reads and closes a response body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("closing body: %v", err)
	}
	return string(b)
}

// attemptLog records OnAttempt and OnDone calls.
type attemptLog struct {
	mu       sync.Mutex
	attempts []Attempt
	done     []Outcome
}

func (l *attemptLog) onAttempt(_ *http.Request, a Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
}

func (l *attemptLog) onDone(_ *http.Request, o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = append(l.done, o)
}

// countingBody is a request body that counts its Close calls.
type countingBody struct {
	io.Reader
	mu     sync.Mutex
	closed int
}

func (b *countingBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed++
	return nil
}

func (b *countingBody) closes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

func newCountingBody(s string) *countingBody {
	return &countingBody{Reader: strings.NewReader(s)}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// response builds an in-memory response for req.
func response(req *http.Request, status int, body string) *http.Response {
	return &http.Response{
		StatusCode:    status,
		Header:        http.Header{},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// closedAddr returns a loopback address where nothing listens: a
// listener's port, closed. Connections to it are refused.
func closedAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
