package httpretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/internal/leakcheck"
	"github.com/httpretry/httpretry/throttle"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
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
	awaitWaiters(t, fc, n)
	fc.Advance(d)
}

// awaitWaiters waits until the fake clock has at least n waiters, for at
// most hangGuardBody: a waiter that never comes fails the test under its
// name, not the package's timeout.
func awaitWaiters(t *testing.T, fc *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuardBody)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
}

// hitsCounter is a Base that counts the requests it has taken.
type hitsCounter interface{ Hits() int }

// advanceAt waits until base has taken n requests and the fake clock has
// at least waiters waiters, then moves the clock forward by d. A request
// that hangs registers no waiter of its own, so the hit count is what
// shows that it is in flight.
func advanceAt(t *testing.T, fc *clockwork.FakeClock, base hitsCounter, n, waiters int, d time.Duration) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("request %d to reach base", n), func() bool { return base.Hits() >= n })
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
// the last: a fixed jitter, for worked examples with known waits.
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

// get sends a GET of url through rt and closes the response's body. It
// returns RoundTrip's error.
func get(t *testing.T, rt http.RoundTripper, url string) error {
	t.Helper()
	resp, err := rt.RoundTrip(newRequest(t, context.Background(), "GET", url, nil))
	if err == nil {
		resp.Body.Close()
	}
	return err
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

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

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

// zeroReader reads zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

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

// evenDraws returns a fixed sequence of draws spread evenly over [0, 1)
// at every scale (the golden-ratio sequence), so that a simulation's
// result depends on no seed and any stretch of draws samples [0, 1)
// evenly.
func evenDraws() func() float64 {
	x := 0.0
	return func() float64 {
		x += 0.6180339887498949
		x -= math.Floor(x)
		return x
	}
}

// throttleAt tells th of n attempts to req's destination: accepted, or
// answered 503.
func throttleAt(th *throttle.Throttle, req *http.Request, fc clockwork.Clock, n int, accepted bool) {
	r := throttle.Result{Status: 503, Overload: true}
	if accepted {
		r = throttle.Result{Status: 200}
	}
	d := th.Dest(req)
	for range n {
		th.Record(d, &r, fc)
	}
}

// Helpers for the tests of the core's edges with real servers: a
// server shutting down under a POST, bodies that lie about their length or
// sit exactly at BufferResponse's limit, the deprecated Request.Cancel
// channel, and many concurrent operations sharing pooled traces.

// rawServer serves each connection with handle on 127.0.0.1, after
// reading one request's header.
func rawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				handle(c)
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// closeCounter counts the Close calls of a ReadCloser.
type closeCounter struct {
	io.ReadCloser
	closes atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return c.ReadCloser.Close()
}

// panicOf runs tr.RoundTrip(req) and returns what it panicked with (nil
// when it returned), failing the test when it does neither.
func panicOf(t *testing.T, tr http.RoundTripper, req *http.Request) any {
	t.Helper()
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		tr.RoundTrip(req)
	}()
	select {
	case p := <-got:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip neither returned nor panicked")
		return nil
	}
}

// pollUntil polls cond every millisecond until it holds, for at most
// hangGuardBody, and fails the test with what it waited for when it never
// does: a poll for what must happen never waits without a bound.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(hangGuardBody); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", hangGuardBody, what)
		}
	}
}
