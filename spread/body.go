package spread

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// track wraps resp's body so that its address is released once, when
// the body is closed or a read ends it, and, when the response's headers
// were a success (pending), judges the address by how the body ended
// (judgeBody). A switched protocol's body, which is also written to, and
// an empty body are not wrapped: the address is judged and released at
// once.
func (h *host) track(a *addr, resp *http.Response, pending bool) *http.Response {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		if pending {
			h.recordSuccess(a)
		}
		h.release(a)
		return resp
	}
	b := &trackedBody{rc: resp.Body, h: h, a: a, pending: pending, ctx: context.Background()}
	if resp.Request != nil {
		b.ctx = resp.Request.Context()
	}
	resp.Body = b
	return resp
}

// trackedBody is a response body whose end releases its address.
type trackedBody struct {
	rc      io.ReadCloser
	h       *host
	a       *addr
	pending bool            // the headers were a success: the body's end judges the address
	ctx     context.Context // the request's: how it ended judges a body cut short
	once    sync.Once
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.done(err)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.rc.Close()
	b.done(nil)
	return err
}

// done judges and releases the address, once: at the first read that
// ends the body (err), or at Close (nil).
func (b *trackedBody) done(err error) {
	b.once.Do(func() {
		if b.pending {
			switch judgeBody(err, endingOf(b.ctx)) {
			case success:
				b.h.recordSuccess(b.a)
			case failure:
				b.h.recordFailure(b.a, false)
			}
		}
		b.h.release(b.a)
	})
}

// afterClose is a response body that runs after once it is closed.
type afterClose struct {
	io.ReadCloser
	after func()
	once  sync.Once
}

func (b *afterClose) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.after)
	return err
}
