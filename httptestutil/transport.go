package httptestutil

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Transport is a scripted, in-memory [http.RoundTripper] for deterministic
// unit tests: the n-th request takes the n-th [Step], after the script runs
// out the last step repeats, and an empty script answers 200 with an empty
// body. Every wait (Delay, Trickle's Interval) runs on its Clock, so a test
// with a [clockwork.FakeClock] decides when time passes and needs no sleep.
//
// Besides the requests, a Transport records every response it returned and
// what became of its body, so that a test can check that a retry layer
// closes what it discards and hands the caller the right response.
//
// A Transport is safe for concurrent use by multiple goroutines. It starts
// no goroutines: every wait happens in the caller's RoundTrip or Read.
type Transport struct {
	clock  clockwork.Clock
	script script

	mu     sync.Mutex // protects resps and bodies
	resps  []*http.Response
	bodies []*body
}

// NewTransport returns a Transport that follows steps, waiting on clock. A
// nil clock means the real clock.
func NewTransport(clock clockwork.Clock, steps ...Step) *Transport {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Transport{clock: clock, script: script{steps: slices.Clone(steps)}}
}

// RoundTrip implements [http.RoundTripper]. As a real transport does, it
// reads the request body in full and closes it, and refuses a request whose
// context has already ended without recording it. Then it records the
// request and plays its step: a step's Err (after Delay) is returned as is;
// CloseConn returns an error wrapping io.EOF; Hang blocks until the request
// context ends; the other actions return a response whose body is tracked.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if done(ctx) {
		closeBody(req)
		return nil, ctx.Err()
	}
	step, hit := t.script.takeStep(req)
	if step.neverSent() {
		// A refused dial sends nothing: the body stays unread, for the
		// client to send whole on its next attempt.
		closeBody(req)
		return nil, step.Err
	}
	data, err := readBody(req.Body)
	closeBody(req)
	t.script.recordBody(hit, data)
	if err != nil {
		return nil, fmt.Errorf("httptestutil: reading request body: %w", err)
	}

	if err := wait(ctx, t.clock, step.Delay, nil); err != nil {
		return nil, err
	}
	if step.Err != nil {
		return nil, step.Err
	}
	b := &body{data: []byte(step.Body), ctx: ctx, end: len(step.Body), closed: make(chan struct{})}
	switch step.Action {
	case Respond:
	case CloseConn:
		return nil, errClosedConn
	case Hang:
		// No timer: a hanging request must not count as a fake-clock
		// waiter, or BlockUntilContext could not tell it from a Delay.
		<-ctx.Done()
		return nil, ctx.Err()
	case Trickle:
		b.clock, b.interval = t.clock, step.interval()
	case ResetBody:
		b.end, b.reset = len(step.Body)/2, true
	default:
		return nil, fmt.Errorf("httptestutil: unknown Action %d", step.Action)
	}
	code := step.status()
	resp := &http.Response{
		StatusCode:    code,
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        step.header(false),
		Body:          b,
		ContentLength: step.contentLength(),
		Request:       req,
	}
	if n := resp.ContentLength; n != int64(len(step.Body)) && step.Action != ResetBody {
		// A false Content-Length, as the Server sends it: a body shorter
		// than promised ends in io.ErrUnexpectedEOF; a longer one is
		// refused whole by net/http's server (it writes nothing of a
		// Write past the length), so nothing arrives.
		if n < int64(len(step.Body)) {
			b.end = 0
		}
		b.short = n > int64(b.end)
	}
	t.mu.Lock()
	t.resps = append(t.resps, resp)
	t.bodies = append(t.bodies, b)
	t.mu.Unlock()
	return resp, nil
}

// Hits reports how many requests the Transport has recorded.
func (t *Transport) Hits() int { return t.script.hits() }

// Requests returns copies of the recorded requests, in arrival order.
func (t *Transport) Requests() []Request { return t.script.requests() }

// OpenBodies reports how many returned response bodies have not been
// closed: after a client is done, anything but 0 is a leaked connection in
// a real transport.
func (t *Transport) OpenBodies() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, b := range t.bodies {
		if !b.isClosed() {
			n++
		}
	}
	return n
}

// Responses returns every response the Transport returned, in order, so
// that a test can check which one its caller got by comparing pointers.
func (t *Transport) Responses() []*http.Response {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.resps)
}

// BodyClosed reports whether the body of the i-th returned response
// (0-based, in the order of Responses) was closed. It panics if i is out
// of range, as indexing Responses would.
func (t *Transport) BodyClosed(i int) bool { return t.bodyAt(i).isClosed() }

// BodyRead reports how many bytes of the body of the i-th returned
// response (0-based, in the order of Responses) have been read so far. It
// panics if i is out of range.
func (t *Transport) BodyRead(i int) int64 { return t.bodyAt(i).bytesRead() }

func (t *Transport) bodyAt(i int) *body {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bodies[i]
}

// errResetBody is a ResetBody step's error once its half body is read.
var errResetBody = fmt.Errorf("httptestutil: connection reset while reading the body: %w", ErrReset)

// body is a Transport response body that records how far it was read and
// whether it was closed. Like a real body, it fails once the request
// context has ended, and Close ends a Read waiting on the clock. Reads must
// not be concurrent with each other; Close may run at any time.
type body struct {
	data     []byte
	end      int             // bytes served before EOF or the reset
	reset    bool            // after end, fail with errResetBody, not io.EOF
	short    bool            // after end, fail with io.ErrUnexpectedEOF: Content-Length promised more
	ctx      context.Context // the request's
	clock    clockwork.Clock // non-nil for Trickle: each byte waits interval
	interval time.Duration
	closed   chan struct{} // closed by Close

	off       atomic.Int64
	closeOnce sync.Once
}

func (b *body) Read(p []byte) (int, error) {
	if b.isClosed() {
		return 0, errReadAfterClose
	}
	if done(b.ctx) {
		return 0, b.ctx.Err()
	}
	off := int(b.off.Load())
	if off >= b.end {
		switch {
		case b.reset:
			return 0, errResetBody
		case b.short:
			return 0, io.ErrUnexpectedEOF
		}
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	chunk := b.data[off:b.end]
	if b.clock != nil {
		if err := wait(b.ctx, b.clock, b.interval, b.closed); err != nil {
			return 0, err
		}
		chunk = chunk[:1]
	}
	n := copy(p, chunk)
	b.off.Add(int64(n))
	return n, nil
}

func (b *body) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

func (b *body) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

func (b *body) bytesRead() int64 { return b.off.Load() }

// wait sleeps for d on clock, returning early with the context's error if
// ctx ends, or errReadAfterClose if closed (which may be nil) is closed. A
// d of 0 or less returns at once without creating a timer, so that only
// real waits count as fake-clock waiters.
func wait(ctx context.Context, clock clockwork.Clock, d time.Duration, closed <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	timer := clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return nil
	case <-ctx.Done():
		// Only now is Err safe: a live clockwork fake context blocks in
		// Err until it ends.
		return ctx.Err()
	case <-closed:
		return errReadAfterClose
	}
}

// done reports whether ctx has ended, without blocking: Err would block
// on a live clockwork fake context.
func done(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// closeBody closes a request body, as RoundTrip must on every path.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
