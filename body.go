package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// This file holds request bodies: buffering one of known length so that it
// can be sent on every attempt, and tracking one that cannot be rewound.
// Response bodies are in response.go.

// bodyKind says how an operation's request body is sent again.
type bodyKind uint8

const (
	bodyNone    bodyKind = iota // no body, or http.NoBody: nothing to rewind
	bodyGetBody                 // retries take a fresh body from GetBody
	bodyOnce                    // no GetBody and not buffered: sent again only if never read
	bodyDirect                  // one attempt only: the caller's body goes to Base as it is
)

// reqBody is an operation's request body: how it is sent again, whether
// the caller's is still the operation's to close, the onceBody of one
// that cannot be rewound, and the body GetBody gave for the next attempt.
type reqBody struct {
	kind  bodyKind
	owned bool          // the caller's body is still ours to close
	once  *onceBody     // the body of a bodyOnce operation
	next  io.ReadCloser // obtained for the next attempt, not yet sent
}

// attach gives attempt a's own request its body: the one GetBody made for
// a retry (resend), or a tracker of the body that cannot be rewound.
func (b *reqBody) attach(req *http.Request, resend bool, a *attempt) {
	if resend {
		req.Body, b.next = b.next, nil
	} else if b.kind == bodyOnce {
		// Each attempt reads through its own tracker, so that the next
		// one can tell whether this one read anything.
		a.tracker = &readTracker{body: b.once}
		req.Body = a.tracker
	}
}

// fresh asks the template's GetBody for the body of the next attempt, and
// reports whether it gave one.
func (b *reqBody) fresh(tmpl *http.Request) bool {
	r, err := tmpl.GetBody()
	if err != nil || r == nil {
		return false
	}
	b.next = r
	return true
}

// rewindable reports whether the body can be sent again whole after an
// attempt that read it through tracker: a body that cannot be rewound
// only when nothing of it was read, whether or not the request left; one
// sent directly, never.
func (b *reqBody) rewindable(tracker *readTracker) bool {
	switch b.kind {
	case bodyOnce:
		return !tracker.didRead()
	case bodyDirect:
		return false
	}
	return true
}

// close closes what the operation still holds of the body when RoundTrip
// returns: the caller's if no attempt took it, one obtained for a retry
// never sent, and one that cannot be rewound unless Base holds it (last,
// the last attempt, read through its tracker).
func (b *reqBody) close(req *http.Request, last *attempt) {
	if b.owned {
		req.Body.Close()
	}
	if b.once != nil {
		b.once.end(last.tracker)
	}
	if b.next != nil {
		b.next.Close()
	}
}

// size is the size of the request body req carries, for an operation that
// could not send it again: its ContentLength when known, else what was
// read.
func (b *reqBody) size(req *http.Request) int64 {
	if req.ContentLength > 0 || b.once == nil {
		return req.ContentLength
	}
	return b.once.read.Load()
}

// errShortBody reports a request body that ended before its ContentLength.
var errShortBody = errors.New("httpretry: request body shorter than its ContentLength")

// bufferBody reads a body of known length into memory, so that it can be
// sent on every attempt, and closes it. It returns the body as a request
// template with Body and GetBody set.
//
// Reading ends when ctx ends: a slow body (a forwarded upload, a pipe)
// must not hold RoundTrip past its deadline. The body is then closed under
// the blocked Read, which is how an io.Pipe or a network body is
// interrupted; the caller sees ctx's error. Either way the body is closed
// exactly once, and before bufferBody returns: a Close need not be
// idempotent, and a caller that counts its closes (or reuses a file
// descriptor) once RoundTrip has returned must find the body closed. The
// close that ctx starts runs on a goroutine of its own, so bufferBody
// waits for it, even when ctx had already ended and the whole body was
// read before that goroutine ran.
//
// A body longer than its ContentLength is an error, as it is for
// [http.Transport], and nothing is sent: sending the first ContentLength
// bytes would silently truncate the request.
func bufferBody(ctx context.Context, req *http.Request, limit int64) (*http.Request, error) {
	closedByCtx := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closedByCtx)
		req.Body.Close()
	})
	buf, err := readExactly(req.Body, req.ContentLength, limit)
	if !stop() {
		// The AfterFunc has started: wait until it has closed the body.
		<-closedByCtx
		return nil, context.Cause(ctx)
	}
	closeErr := req.Body.Close()
	if err != nil {
		return nil, err
	}
	if closeErr != nil {
		return nil, closeErr
	}
	r := req.WithContext(req.Context())
	r.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf)), nil
	}
	r.Body, _ = r.GetBody()
	return r, nil
}

// readExactly reads a body that announced n bytes, and checks that it has
// no more; extra bytes are counted, up to limit more, for the error.
func readExactly(body io.Reader, n, limit int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := io.ReadFull(body, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, errShortBody
		}
		return nil, err
	}
	extra, err := io.Copy(io.Discard, io.LimitReader(body, limit))
	if extra > 0 {
		// net/http's wording, so the two transports say the same.
		return nil, fmt.Errorf("httpretry: http: ContentLength=%d with Body length %d", n, n+extra)
	}
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// onceBody holds a request body that cannot be rewound. Each attempt sends
// it through its own readTracker, which records whether the attempt read
// any of it: a body never read can still be sent whole on the next
// attempt, whether the connection was never made or the request went
// without its body (an "Expect: 100-continue" answered with a final
// status). Before the next attempt takes it, the last attempt's tracker is
// sealed, so that a Base still holding it cannot start reading it then.
//
// Once an attempt has handed the body to Base, Base owns it, and Base
// closes it: a streaming body (an HTTP/2 or full-duplex upload) is still
// being written after RoundTrip returns, and closing it under the
// transport's feet breaks the stream. The operation closes the body itself
// only when no Base holds it: never sent, or closed by Base unread while a
// retry was still possible.
type onceBody struct {
	rc   io.ReadCloser
	read atomic.Int64 // bytes read by all attempts, for Outcome.BodySize

	mu     sync.Mutex // protects ended and the trackers' closedUnread
	ended  bool       // no attempt will send the body again
	closed bool       // rc was closed
}

// closeLocked closes rc once. mu must be held.
func (b *onceBody) closeLocked() {
	if !b.closed {
		b.closed = true
		b.rc.Close()
	}
}

// end marks the operation over. last is the tracker of the last attempt
// that was sent, or nil when none was: the body is closed now unless that
// attempt's Base still owns it. A body sealed for a retry that then was
// not sent belongs to no attempt: its Base can no longer read it, and its
// Close, before or after, closes nothing.
func (b *onceBody) end(last *readTracker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	if last == nil || last.closedUnread || last.state.Load() == trackerSealed {
		b.closeLocked()
	}
}

// interruptBody arranges for the body attempt a hands to Base to be
// closed if a's context ends while Base is still in RoundTrip, and
// returns what cancels that, or nil when nothing needed arranging.
// net/http's HTTP/1.1 transport waits for a body write blocked in Read
// before RoundTrip returns, whatever the request's context says, so a
// body that stalls (a pipe, a forwarded upload) would hold the operation
// past its Timeout; closing it under the Read is how such a body is
// interrupted, as http.Transport's HTTP/2 side does. The body is still
// closed exactly once: Base's Close and this one go through one closer.
// The caller's own request is never changed: when a sends it as it is,
// its context is the caller's, which bounds it as it bounds a bare
// http.Transport.
func interruptBody(a *attempt, caller *http.Request) (stop func() bool) {
	if a.req == caller || a.req.Body == nil {
		return nil
	}
	return interruptSent(a)
}

// interruptSent is interruptBody's work for an attempt that sends a body
// on its own request, apart so that interruptBody inlines.
func interruptSent(a *attempt) (stop func() bool) {
	req := a.req
	if req.Body == http.NoBody || req.Context().Done() == nil {
		return nil
	}
	if t := a.tracker; t != nil {
		return context.AfterFunc(req.Context(), t.interrupt)
	}
	c := &closeOnce{ReadCloser: req.Body}
	req.Body = c
	return context.AfterFunc(req.Context(), c.interrupt)
}

// closeOnce closes the body it holds once, whoever asks first.
type closeOnce struct {
	io.ReadCloser
	once sync.Once
	err  error
}

func (c *closeOnce) Close() error {
	c.once.Do(func() { c.err = c.ReadCloser.Close() })
	return c.err
}

// interrupt closes the body under a Read that blocks.
func (c *closeOnce) interrupt() { c.Close() }

// readTracker is one attempt's view of a onceBody, like net/http's
// readTrackingBody.
type readTracker struct {
	body         *onceBody
	state        atomic.Int32 // trackerUntouched, trackerRead or trackerSealed
	closedUnread bool         // guarded by body.mu
}

// A readTracker's states. Untouched becomes read at the first Read, or
// sealed when the next attempt takes the body; neither changes again.
const (
	trackerUntouched int32 = iota
	trackerRead
	trackerSealed
)

// errBodyTaken is a sealed tracker's Read error: the body went to the
// next attempt.
var errBodyTaken = errors.New("httpretry: request body taken by the next attempt")

func (r *readTracker) Read(p []byte) (int, error) {
	if !r.state.CompareAndSwap(trackerUntouched, trackerRead) && r.state.Load() == trackerSealed {
		return 0, errBodyTaken
	}
	n, err := r.body.rc.Read(p)
	r.body.read.Add(int64(n))
	return n, err
}

// interrupt closes the body under a Read of this attempt that blocks,
// once its context has ended. A body this attempt never read is left as
// it is, for the next attempt.
func (r *readTracker) interrupt() {
	if !r.didRead() {
		return
	}
	b := r.body
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked()
}

// didRead reports whether this attempt read from the body.
func (r *readTracker) didRead() bool { return r.state.Load() == trackerRead }

// seal reports whether the body is still untouched by this attempt, and
// if it is makes sure it stays so: from now on Read fails without reading.
// It is called once per attempt, when the next one is decided.
func (r *readTracker) seal() bool {
	return r.state.CompareAndSwap(trackerUntouched, trackerSealed)
}

// Close closes the underlying body when this attempt read from it, or
// when the operation is over. An unread body stays open for the next
// attempt, and the operation closes it if none comes; a sealed one
// belongs to the next attempt.
func (r *readTracker) Close() error {
	b := r.body
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.state.Load() == trackerSealed {
		return nil
	}
	if r.didRead() || b.ended {
		b.closeLocked()
		return nil
	}
	r.closedUnread = true
	return nil
}
