package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// This file holds IdleTimeout: an attempt fails when the server stays
// silent for that long while the Transport waits for it on the caller's
// behalf, however long the response keeps flowing. Like a read timeout on
// a connection, it bounds how long one blocking read waits for bytes; it
// never counts time in which the caller was not reading. One timer per
// attempt runs only while someone waits:
//
//   - before the response headers, from the moment the request has been
//     written (net/http's ResponseHeaderTimeout starts there too),
//     restarted by every 1xx interim response after that. Getting a
//     connection and sending the request body are not silence: the dial's
//     own timeouts, Timeout and AttemptTimeout bound them, a body that
//     stalls mid-upload included. A Base that reports no httptrace events
//     is watched from the moment it was handed the attempt;
//   - after the headers, only while a Read of the body is blocked. Bytes
//     that arrive while the caller does something else wait in the
//     connection's buffers (and HTTP/2 flow control); they are not silence.
//
// There is no goroutine and no timer per Read: the one timer is reset.

// errIdleCut is the cause with which an idle watch ends its attempt's
// context, so that net/http returns it rather than context.Canceled.
var errIdleCut error = &idleTimeoutError{}

// idlePhase is what an idle watch is waiting for.
type idlePhase uint8

const (
	phaseHeaders idlePhase = iota // the response headers: httptrace events arm the timer
	phaseBody                     // body bytes: a blocked Read arms the timer
	phaseDone                     // nothing: the attempt ended
)

// idleWatch ends one attempt when its server stays silent for d while the
// timer is armed. When the timer fires it cancels the attempt's context
// with errIdleCut, which closes the connection (or resets the HTTP/2
// stream) under a blocked Read, and the error that Read or Base then
// returns is reported as an idle timeout.
//
// net/http calls the trace hooks from its own goroutines, and a body may
// be closed while it is being read, so the state is guarded by mu.
type idleWatch struct {
	d      time.Duration
	clock  clockwork.Clock
	timer  clockwork.Timer
	cancel context.CancelCauseFunc // of the attempt's context
	trace  httptrace.ClientTrace

	mu       sync.Mutex // protects the fields below
	phase    idlePhase
	written  bool // the request has been written: the headers phase may arm
	armed    bool
	deadline time.Time     // when the armed period ends
	left     time.Duration // of a period paused by a Read that brought nothing; 0: none
	fired    bool
	interim  int64 // size of the 1xx headers of this send
}

// max1xxBytes bounds the total size of the 1xx responses to one request
// sent, as net/http bounds them when no hook sees them (its default limit
// on response headers, and HTTP/2's on header lists, are both 10 MiB).
// Each header field counts its name, its value and headerFieldOverhead,
// as HTTP/2 counts a header list (RFC 9113 §6.5.2).
const (
	max1xxBytes         = 10 << 20
	headerFieldOverhead = 32
)

// errTooMany1xx fails an attempt whose 1xx responses exceed max1xxBytes.
var errTooMany1xx = errors.New("httpretry: too many 1xx informational responses")

// watchIdle derives a context for one attempt that ends when the server
// stays silent for d while the timer is armed, and arms it: the attempt is
// handed to Base now. Install the watch's trace with traced.
func watchIdle(ctx context.Context, clock clockwork.Clock, d time.Duration) (context.Context, *idleWatch) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &idleWatch{d: d, clock: clock, cancel: cancel}
	w.deadline = clock.Now().Add(d)
	w.armed = true
	w.timer = clock.AfterFunc(d, w.expire)
	return ctx, w
}

// traced returns ctx with the watch's httptrace hooks, composed with any
// trace already in ctx. Getting a connection disarms the timer; the
// request written arms it, and each 1xx response after that restarts it.
// A 1xx before the request is written (100 Continue, or hints while the
// body uploads) arms nothing: the body is still being sent.
//
// With a hook for 1xx responses installed, net/http leaves limiting them
// to the hook: the watch bounds their total size as net/http does
// without one (max1xxBytes), so that a server answering with 1xx for ever
// fails the attempt instead of holding it while it restarts the timer.
func (w *idleWatch) traced(ctx context.Context) context.Context {
	w.trace.GetConn = w.gettingConn
	w.trace.WroteRequest = w.wroteRequest
	w.trace.Got1xxResponse = w.got1xx
	return httptrace.WithClientTrace(ctx, &w.trace)
}

// gettingConn: the request is (re)sent on a connection, which net/http
// may do again within one attempt when a reused connection was dead. The
// 1xx responses of the last send no longer count.
func (w *idleWatch) gettingConn(string) {
	w.mu.Lock()
	w.written, w.interim = false, 0
	w.mu.Unlock()
	w.disarm(phaseHeaders, true)
}

func (w *idleWatch) wroteRequest(httptrace.WroteRequestInfo) {
	w.setWritten(true)
	w.arm(phaseHeaders)
}

func (w *idleWatch) got1xx(_ int, h textproto.MIMEHeader) error {
	var size int64
	for k, vv := range h {
		for _, v := range vv {
			size += int64(len(k) + len(v) + headerFieldOverhead)
		}
	}
	w.mu.Lock()
	w.interim += size
	over := w.interim > max1xxBytes
	w.mu.Unlock()
	if over {
		return errTooMany1xx
	}
	w.arm(phaseHeaders)
	return nil
}

func (w *idleWatch) setWritten(written bool) {
	w.mu.Lock()
	w.written = written
	w.mu.Unlock()
}

// arm starts the idle period, if the watch is in phase: a full one, or
// what is left of the last one when the Read that ended it brought no
// bytes.
func (w *idleWatch) arm(phase idlePhase) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phase != phase || w.fired || (phase == phaseHeaders && !w.written) {
		return
	}
	d := w.d
	if w.left > 0 {
		d = w.left
	}
	// The deadline is read before the timer is reset, so that it is never
	// later than the moment the timer fires: expire uses it to ignore a
	// firing left over from an earlier period.
	w.deadline = w.clock.Now().Add(d)
	w.armed = true
	w.timer.Reset(d)
}

// disarm stops the idle period, if the watch is in phase. When nothing
// arrived (progress is false), the period is paused rather than ended:
// the next arm resumes it, and one already over ends the attempt now.
func (w *idleWatch) disarm(phase idlePhase, progress bool) {
	w.mu.Lock()
	cut := false
	if w.phase == phase && w.armed {
		w.armed = false
		w.timer.Stop()
		w.left = 0
		if !progress {
			w.left = w.deadline.Sub(w.clock.Now())
			cut = w.left <= 0
			w.fired = cut
		}
	}
	w.mu.Unlock()
	if cut {
		w.cancel(errIdleCut)
	}
}

// expire ends the attempt, unless the timer was disarmed or re-armed
// since it was set for this firing.
func (w *idleWatch) expire() {
	w.mu.Lock()
	cut := w.armed && !w.fired && !w.clock.Now().Before(w.deadline)
	if cut {
		w.fired, w.armed = true, false
	}
	w.mu.Unlock()
	if cut {
		w.cancel(errIdleCut)
	}
}

// headers ends the wait for the response headers: they arrived. From now
// on only a blocked Read arms the timer.
func (w *idleWatch) headers() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phase == phaseHeaders {
		w.phase, w.armed, w.left = phaseBody, false, 0
		w.timer.Stop()
	}
}

// stop ends the watch and releases the attempt's context: the response
// was read to its end, closed, or discarded. It may be called more than
// once and concurrently with a Read.
func (w *idleWatch) stop() {
	w.mu.Lock()
	w.phase, w.armed = phaseDone, false
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(nil)
}

// wrap reports err as an idle timeout when the watch ended the attempt.
// The error Base or the body returns after the cut (net/http's
// cancellation, context.Canceled over HTTP/2) is a consequence of the
// cut, not the caller's doing: it is replaced, so that the error never
// matches context.Canceled.
func (w *idleWatch) wrap(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	w.mu.Lock()
	fired := w.fired
	w.mu.Unlock()
	if !fired {
		return err
	}
	return &idleTimeoutError{d: w.d}
}

// idleBody is a response body under an idle watch: the idle period runs
// only while a Read is blocked, and a Read that fails because the period
// ran out says so.
type idleBody struct {
	rc io.ReadCloser
	w  *idleWatch
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.w.arm(phaseBody)
	n, err := b.rc.Read(p)
	b.w.disarm(phaseBody, n > 0)
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
// body, whose server stayed silent for IdleTimeout. It wraps nothing: the
// transport's own error after the cut only says that the attempt was
// canceled, which the caller did not do.
type idleTimeoutError struct{ d time.Duration }

func (e *idleTimeoutError) Error() string {
	return "httpretry: response idle timeout: no byte received for " + e.d.String()
}
func (e *idleTimeoutError) Timeout() bool        { return true }
func (e *idleTimeoutError) Is(target error) bool { return target == ErrIdleTimeout }
