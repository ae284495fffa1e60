package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// bodyKind says how an operation's request body is sent again.
type bodyKind uint8

const (
	bodyNone    bodyKind = iota // no body, or http.NoBody: nothing to rewind
	bodyGetBody                 // retries take a fresh body from GetBody
	bodyOnce                    // no GetBody and not buffered: sent once
)

// Bounds on draining a response that is about to be retried. Reading a
// small error body lets its connection go back to the pool; a larger or
// slower one is not worth the wait, and closing it unread only costs a new
// connection. net/http's Client drains redirect bodies on the same idea.
const (
	drainLimit   = 64 << 10
	drainTimeout = 200 * time.Millisecond
)

// errShortBody reports a request body that ended before its ContentLength.
var errShortBody = errors.New("httpretry: request body shorter than its ContentLength")

// bufferBody reads a body of known length into memory, so that it can be
// sent on every attempt, and closes it. It returns the body as a request
// template with Body and GetBody set.
func bufferBody(req *http.Request) (*http.Request, error) {
	buf := make([]byte, req.ContentLength)
	_, err := io.ReadFull(req.Body, buf)
	closeErr := req.Body.Close()
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return nil, errShortBody
	case err != nil:
		return nil, err
	case closeErr != nil:
		return nil, closeErr
	}
	r := req.WithContext(req.Context())
	r.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf)), nil
	}
	r.Body, _ = r.GetBody()
	return r, nil
}

// onceBody holds a request body that cannot be rewound. Each attempt sends
// it through its own readTracker, which records whether the attempt read
// any of it: a body never read (the connection was never made) can still
// be sent whole on the next attempt. It is closed once, by the attempt that
// consumed it or at the end of the operation.
type onceBody struct {
	rc     io.ReadCloser
	closed sync.Once
	err    error
}

func (b *onceBody) close() error {
	b.closed.Do(func() { b.err = b.rc.Close() })
	return b.err
}

// readTracker is one attempt's view of a onceBody, like net/http's
// readTrackingBody.
type readTracker struct {
	body    *onceBody
	didRead atomic.Bool
}

func (r *readTracker) Read(p []byte) (int, error) {
	r.didRead.Store(true)
	return r.body.rc.Read(p)
}

// Close closes the underlying body only when this attempt read from it:
// an unread body stays open for the next attempt, and the operation closes
// it when it ends.
func (r *readTracker) Close() error {
	if r.didRead.Load() {
		return r.body.close()
	}
	return nil
}

// drain reads what is left of a discarded response's body, up to
// drainLimit bytes and for at most drainTimeout, then closes it, so that
// its connection can be reused and nothing is held while waiting. The time
// bound is real time whatever the Transport's Clock: it limits I/O, not a
// wait of the retry policy, and a trickling body must not stall the loop.
func drain(resp *http.Response) {
	body := resp.Body
	if resp.ContentLength > drainLimit {
		// Too long to be worth reading: close it, losing the connection.
		body.Close()
		return
	}
	d := getDrainer(body)
	for n := 0; n < drainLimit; {
		m, err := body.Read(d.buf[:min(len(d.buf), drainLimit-n)])
		n += m
		if err != nil {
			break
		}
	}
	d.release()
	body.Close()
}

// A drainer bounds one drain in time without allocating: its AfterFunc
// timer and its buffer are reused through drainers.
type drainer struct {
	mu    sync.Mutex    // protects body
	body  io.ReadCloser // being drained; nil between drains
	timer *time.Timer
	buf   [4 << 10]byte
}

var drainers sync.Pool

func getDrainer(body io.ReadCloser) *drainer {
	d, _ := drainers.Get().(*drainer)
	if d == nil {
		d = &drainer{}
		d.timer = time.AfterFunc(drainTimeout, d.expire)
		d.timer.Stop()
	}
	d.mu.Lock()
	d.body = body
	d.mu.Unlock()
	d.timer.Reset(drainTimeout)
	return d
}

func (d *drainer) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.body != nil {
		d.body.Close()
	}
}

// release ends the drain. A drainer whose timer already fired is not
// reused: its expire may still be about to run.
func (d *drainer) release() {
	stopped := d.timer.Stop()
	d.mu.Lock()
	d.body = nil
	d.mu.Unlock()
	if stopped {
		drainers.Put(d)
	}
}

// cancelBody is the Body of a returned response whose attempt ran under
// contexts the Transport derived. It releases them when the caller reaches
// EOF or closes the body, so that the body stays readable until then and
// reading it stays bounded by the Timeout and AttemptTimeout.
type cancelBody struct {
	rc            io.ReadCloser
	cancelAttempt context.CancelFunc // nil when there was none
	cancelOp      context.CancelFunc // nil when there was none
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.release()
	return err
}

// release cancels the derived contexts; CancelFuncs may be called more
// than once and concurrently.
func (b *cancelBody) release() {
	if b.cancelAttempt != nil {
		b.cancelAttempt()
	}
	if b.cancelOp != nil {
		b.cancelOp()
	}
}

// cancelRWBody is a cancelBody for a 101 Switching Protocols response,
// whose Body net/http makes writable for the new protocol.
type cancelRWBody struct {
	cancelBody
	w io.Writer
}

func (b *cancelRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// wrapBody makes resp's body release the given contexts, keeping it
// writable for 101 responses. With nothing to release it returns resp as
// is.
func wrapBody(resp *http.Response, cancelAttempt, cancelOp context.CancelFunc) {
	if cancelAttempt == nil && cancelOp == nil {
		return
	}
	if resp.Body == http.NoBody {
		// Nothing will be read: release at once.
		if cancelAttempt != nil {
			cancelAttempt()
		}
		if cancelOp != nil {
			cancelOp()
		}
		return
	}
	cb := cancelBody{rc: resp.Body, cancelAttempt: cancelAttempt, cancelOp: cancelOp}
	if w, ok := resp.Body.(io.Writer); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &cancelRWBody{cancelBody: cb, w: w}
		return
	}
	resp.Body = &cb
}
