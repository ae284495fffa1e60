package spread

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// track wraps resp's body so that its address is released once, when
// the body is closed or a read ends it, and so that a read that fails
// (a reset, a stall cut by the request's context) counts against the
// address. A switched protocol's body, which is also written to, is not
// wrapped: its address is released at once.
func (h *host) track(a *addr, resp *http.Response) *http.Response {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		h.release(a)
		return resp
	}
	resp.Body = &trackedBody{rc: resp.Body, h: h, a: a}
	return resp
}

// trackedBody is a response body whose end releases its address.
type trackedBody struct {
	rc   io.ReadCloser
	h    *host
	a    *addr
	once sync.Once
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if err != io.EOF && !errors.Is(err, context.Canceled) {
			b.h.recordFailure(b.a, false)
		}
		b.done()
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.rc.Close()
	b.done()
	return err
}

func (b *trackedBody) done() {
	b.once.Do(func() { b.h.release(b.a) })
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
