package httpretry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// This file holds response bodies: reading one within its attempt
// (BufferResponse), draining one that is discarded before a retry, and
// wrapping the one returned to the caller so that it releases the
// operation's contexts and keeps its idle limit.

// bufferable reports whether an attempt's response body is read as part
// of the attempt: BufferResponse is on, the request is safe to repeat and
// its body can be sent again (a response that fails midway is then
// retried; otherwise the caller must see the status the server sent), and
// the response has a body that is not a protocol switch.
func (op *operation) bufferable(req *http.Request, resp *http.Response) bool {
	return op.t.BufferResponse > 0 && op.idempotent && op.body.kind != bodyOnce && op.body.kind != bodyDirect &&
		req.Method != http.MethodHead &&
		resp.StatusCode != http.StatusSwitchingProtocols &&
		resp.Body != http.NoBody
}

// bufferResponse reads resp's body, up to limit bytes, within the
// attempt's time, so that an attempt means a complete, usable response
// rather than headers alone. It reports whether the body is now held in
// memory; on a read error it closes the body and returns the error, which
// the caller treats as the attempt's failure.
//
// The body is read to its EOF, even when its length is known: HTTP/2
// trailers arrive after the last byte of data and net/http fills
// resp.Trailer only when a Read reports EOF. Past a known length at most
// one byte more is read; bytes beyond the length the response announced
// are not returned, as net/http returns none of an HTTP/1.1 body.
//
// A body longer than limit, known from ContentLength or found while
// reading, is left streaming: the bytes already read are put back in
// front of the rest, so nothing is lost. Memory held per response never
// exceeds limit bytes.
func bufferResponse(resp *http.Response, limit int64) (buffered bool, err error) {
	if resp.ContentLength > limit {
		return false, nil
	}
	body := resp.Body
	known := resp.ContentLength >= 0
	buf, err := readAtMost(body, resp.ContentLength, known, limit)
	var more []byte
	if err == nil && (known || int64(len(buf)) == limit) {
		// Unknown length: the body may go on, and one more byte tells.
		// Known: the EOF is still to be read, and the trailers with it.
		more, err = readEOF(body)
	}
	if err != nil {
		body.Close()
		return false, err
	}
	if len(more) > 0 && !known {
		resp.Body = &prefixedBody{
			Reader: io.MultiReader(bytes.NewReader(buf), bytes.NewReader(more), body),
			body:   body,
		}
		return false, nil
	}
	body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	resp.ContentLength = int64(len(buf))
	return true, nil
}

// readEOF reads a body expected to be at its end. It returns nil when the
// body reported EOF, or the one byte it found instead.
func readEOF(body io.Reader) ([]byte, error) {
	one := make([]byte, 1)
	n, err := io.ReadFull(body, one)
	if n == 1 {
		return one, nil
	}
	if err == io.EOF {
		return nil, nil
	}
	return nil, err
}

// readAtMost reads a body into a buffer of at most limit bytes. A body of
// known length (length, at most limit) is read to exactly that length and
// no further, as net/http reads one; any other is read to EOF, and one that
// reaches limit is returned without error, for the caller to probe.
func readAtMost(r io.Reader, length int64, known bool, limit int64) ([]byte, error) {
	if known {
		buf := make([]byte, length)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // a body shorter than announced
			}
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, 0, min(512, limit))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			// Grow by doubling, never beyond limit.
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// prefixedBody streams the bytes already read, then the rest of the body.
type prefixedBody struct {
	io.Reader
	body io.ReadCloser
}

func (b *prefixedBody) Close() error { return b.body.Close() }

// Bounds on draining a response that is about to be retried. Reading a
// small error body lets its connection go back to the pool; a larger or
// slower one is not worth the wait, and closing it unread only costs a new
// connection. net/http's Client drains redirect bodies on the same idea.
const (
	drainLimit   = 64 << 10
	drainTimeout = 200 * time.Millisecond
)

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
	cancelAttempt canceler           // nil when there was none
	cancelOp      context.CancelFunc // nil when there was none
	idle          *idleWatch         // nil without IdleTimeout
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
	if b.idle != nil {
		b.idle.stop()
	}
	if b.cancelAttempt != nil {
		b.cancelAttempt.cancel()
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

// wrapBody makes resp's body release the given contexts and idle watch,
// keeping it writable for 101 responses. With nothing to release it leaves
// resp as it is.
func wrapBody(resp *http.Response, cancelAttempt canceler, cancelOp context.CancelFunc, idle *idleWatch) {
	if cancelAttempt != nil || cancelOp != nil || idle != nil {
		wrapBodyWith(resp, cancelAttempt, cancelOp, idle)
	}
}

// wrapBodyWith is wrapBody's work when there is something to release,
// apart so that wrapBody inlines.
func wrapBodyWith(resp *http.Response, cancelAttempt canceler, cancelOp context.CancelFunc, idle *idleWatch) {
	v := cancelBody{rc: resp.Body, cancelAttempt: cancelAttempt, cancelOp: cancelOp, idle: idle}
	if resp.Body == http.NoBody {
		// Nothing will be read: release at once.
		v.release()
		return
	}
	if w, ok := resp.Body.(io.Writer); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &cancelRWBody{cancelBody: v, w: w}
		return
	}
	var cb *cancelBody
	if c, ok := cancelAttempt.(*lazyCancelCtx); ok {
		cb = &c.body // allocated with the attempt's context
	} else {
		cb = new(cancelBody)
	}
	*cb = v
	resp.Body = cb
}
