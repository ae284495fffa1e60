//go:build !mutation

package httpretry

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// fmRecorder is a cell's Base: an *http.Transport, and a record of what
// each attempt met there: when it was sent and answered, its response
// (status, headers, and what became of its body) or its error, and
// whether it ever had a connection. The cells judge the Transport by
// these facts, whichever way a race on the loopback went.
type fmRecorder struct {
	base *http.Transport

	mu    sync.Mutex // protects calls
	calls []*fmCall
}

// fmCall is one attempt as the recorder saw it.
type fmCall struct {
	start, end time.Time
	status     int // 0 for an error
	header     http.Header
	err        error
	body       *fmRespBody // nil for an error or http.NoBody

	mu       sync.Mutex // protects the fields below, set by the trace and the request body
	gotConn  bool
	bodyRead bool      // Base read the request body
	reused   bool      // the connection came from the pool
	pooledAt time.Time // when the connection went back to the pool, if it did
}

// pooled reports when the attempt's connection went back to the pool,
// and whether it did.
func (c *fmCall) pooled() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pooledAt, !c.pooledAt.IsZero()
}

// reusedConn reports whether the attempt had a connection from the pool.
func (c *fmCall) reusedConn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reused
}

// leftClient reports whether the attempt may have reached the server:
// it had a connection. An attempt that never had one (a refused dial, a
// time limit during the dial) provably sent nothing.
func (c *fmCall) leftClient() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gotConn
}

func (r *fmRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &fmCall{start: time.Now()}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	// WithClientTrace composes with the trace the Transport installed.
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.gotConn, c.reused = true, info.Reused
		},
		// HTTP/1 only: HTTP/2 shares its connection instead.
		PutIdleConn: func(err error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err == nil && c.pooledAt.IsZero() {
				c.pooledAt = time.Now()
			}
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &fmReqBody{rc: req.Body, call: c}
	}
	resp, err := r.base.RoundTrip(req)
	c.end = time.Now()
	if err != nil {
		c.err = err
		return nil, err
	}
	c.status, c.header = resp.StatusCode, resp.Header.Clone()
	if resp.Body != http.NoBody {
		// NoBody is left as it is: the Transport treats it as no body.
		c.body = &fmRespBody{rc: resp.Body, length: resp.ContentLength}
		resp.Body = c.body
	}
	return resp, nil
}

// readBody reports whether Base read the attempt's request body.
func (c *fmCall) readBody() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bodyRead
}

// fmReqBody records whether Base read a request body: a Read counts as
// soon as it starts, as the Transport counts it, unless the Transport had
// already taken the body for the next attempt and refused it.
type fmReqBody struct {
	rc   io.ReadCloser
	call *fmCall
}

func (b *fmReqBody) Read(p []byte) (int, error) {
	b.call.mu.Lock()
	b.call.bodyRead = true
	b.call.mu.Unlock()
	n, err := b.rc.Read(p)
	if errors.Is(err, errBodyTaken) {
		// Refused: only an untouched body is taken.
		b.call.mu.Lock()
		b.call.bodyRead = false
		b.call.mu.Unlock()
	}
	return n, err
}

func (b *fmReqBody) Close() error { return b.rc.Close() }

// CloseIdleConnections lets the Transport's CloseIdleConnections reach
// the pool.
func (r *fmRecorder) CloseIdleConnections() { r.base.CloseIdleConnections() }

func (r *fmRecorder) snapshot() []*fmCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*fmCall(nil), r.calls...)
}

// fmRespBody records whether a response body was read, read to its end,
// and closed.
type fmRespBody struct {
	rc     io.ReadCloser
	length int64 // the response's ContentLength

	mu     sync.Mutex // protects the fields below
	reads  int
	eof    bool
	closed bool
}

func (b *fmRespBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *fmRespBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.rc.Close()
}

// fmBodyState is what had become of a response body at some moment.
type fmBodyState struct {
	read, eof, closed bool
}

func (b *fmRespBody) state() fmBodyState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmBodyState{read: b.reads > 0, eof: b.eof, closed: b.closed}
}
