package httpretry

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// This file holds IdleTimeout: an attempt fails when no byte of its
// response arrives for that long, however long the response keeps
// flowing. One timer per attempt is reset by every Read that brings bytes;
// there is no goroutine and no timer per Read.

// idleWatch ends one attempt when its response goes quiet. When its timer
// fires it cancels the attempt's context, which closes the connection (or
// resets the HTTP/2 stream) under a blocked Read, and the error that Read
// returns is then reported as an idle timeout.
type idleWatch struct {
	d      time.Duration
	timer  clockwork.Timer
	cancel context.CancelFunc // of the attempt's context
	fired  atomic.Bool
}

// watchIdle derives a context for one attempt that ends when the attempt
// has received nothing for d, and starts the watch. The watch runs until
// stop; the attempt is sent now, so the response headers must arrive
// within d.
func watchIdle(ctx context.Context, clock clockwork.Clock, d time.Duration) (context.Context, *idleWatch) {
	ctx, cancel := context.WithCancel(ctx)
	w := &idleWatch{d: d, cancel: cancel}
	w.timer = clock.AfterFunc(d, w.expire)
	return ctx, w
}

func (w *idleWatch) expire() {
	w.fired.Store(true)
	w.cancel()
}

// progress restarts the idle period: bytes arrived.
func (w *idleWatch) progress() {
	if !w.fired.Load() {
		w.timer.Reset(w.d)
	}
}

// stop ends the watch and releases the attempt's context: the response
// was read to its end, closed, or discarded.
func (w *idleWatch) stop() {
	w.timer.Stop()
	w.cancel()
}

// wrap reports err as an idle timeout when the watch ended the attempt.
func (w *idleWatch) wrap(err error) error {
	if err == nil || err == io.EOF || !w.fired.Load() {
		return err
	}
	return &idleTimeoutError{err: err}
}

// idleBody is a response body under an idle watch: each Read that brings
// bytes restarts the idle period, and a Read that fails because the
// period ran out says so.
type idleBody struct {
	rc io.ReadCloser
	w  *idleWatch
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.progress()
	}
	if err == io.EOF {
		b.w.stop()
	}
	return n, b.w.wrap(err)
}

func (b *idleBody) Close() error {
	err := b.rc.Close()
	b.w.stop()
	return err
}

// idleTimeoutError is the error of an attempt, or of a Read of a returned
// body, that received nothing for IdleTimeout. It keeps the transport's
// own error in its chain.
type idleTimeoutError struct{ err error }

func (e *idleTimeoutError) Error() string {
	return "httpretry: response idle timeout: " + e.err.Error()
}
func (e *idleTimeoutError) Unwrap() error        { return e.err }
func (e *idleTimeoutError) Timeout() bool        { return true }
func (e *idleTimeoutError) Is(target error) bool { return target == ErrIdleTimeout }
