package httpretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// onAttempt reports the attempt that just ended to OnAttempt, with the
// wait scheduled before the next one (0 when none follows).
func (op *operation) onAttempt(wait time.Duration) {
	if op.t.OnAttempt == nil {
		return
	}
	op.t.OnAttempt(op.req, Attempt{
		Number:   op.attempts,
		Status:   op.status,
		Err:      op.err,
		Duration: op.lastElapsed,
		Wait:     wait,
	})
}

// report delivers the operation's outcome to WithOutcome, OnDone and the
// Logger (for every stop but Final).
func (op *operation) report(o Outcome) {
	if op.out != nil {
		*op.out = o
	}
	if op.t.OnDone != nil {
		op.t.OnDone(op.req, o)
	}
	if op.t.Logger != nil && o.Reason != Final {
		op.log(slog.LevelWarn, "httpretry: stop", 0, o.Reason)
	}
}

// logRetry records a decision to retry.
func (op *operation) logRetry(d decision) {
	if op.t.Logger == nil {
		return
	}
	op.log(slog.LevelInfo, "httpretry: retry", d.wait, "")
}

// log writes one record about the last attempt. It carries the request's
// method, host and path only: the query string, userinfo, headers and
// bodies may hold secrets and never reach a log. Errors appear as a class
// from a small fixed set, since their text can quote a URL.
func (op *operation) log(level slog.Level, msg string, wait time.Duration, reason StopReason) {
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs,
		slog.String("method", op.method()),
		slog.String("host", op.host()),
		slog.String("path", op.path()),
		slog.Int("attempt", op.attempts),
	)
	if op.err != nil {
		attrs = append(attrs, slog.String("error", errorClass(op.err)))
	} else {
		attrs = append(attrs, slog.Int("status", op.status))
	}
	if reason == "" {
		attrs = append(attrs, slog.Duration("wait", wait))
	}
	if op.hasDeadline {
		attrs = append(attrs, slog.Duration("time_left", op.deadline.Sub(op.clock.Now())))
	}
	if reason != "" {
		attrs = append(attrs, slog.String("reason", string(reason)))
	}
	op.t.Logger.LogAttrs(op.callerCtx, level, msg, attrs...)
}

func (op *operation) host() string {
	if u := op.req.URL; u != nil {
		// URL.Host never holds userinfo; that is in URL.User.
		return u.Host
	}
	return op.req.Host
}

func (op *operation) path() string {
	if u := op.req.URL; u != nil {
		return u.Path
	}
	return ""
}

// finish ends the operation: it reports the outcome and returns resp with
// a nil error when there is one, or a *Error.
func (op *operation) finish(resp *http.Response, reason StopReason, cancelAttempt context.CancelFunc) (*http.Response, error) {
	if reason == Canceled && op.stopErr == nil && resp == nil {
		// Base may report a canceled attempt in its own words; the
		// caller's context error must still be in the chain.
		if cerr := op.callerErr(); !errors.Is(op.err, cerr) {
			op.stopErr = fmt.Errorf("%w (attempt: %w)", cerr, op.err)
		}
	}
	if resp != nil {
		if op.observed() {
			op.report(op.outcome(reason))
		}
		if op.buffered && op.cancel != nil {
			// Nothing more will be read from the network.
			op.cancel()
			return resp, nil
		}
		wrapBody(resp, cancelAttempt, op.cancel)
		return resp, nil
	}
	o := op.outcome(reason)
	op.report(o)
	if cancelAttempt != nil {
		cancelAttempt()
	}
	if op.cancel != nil {
		op.cancel()
	}
	e := &Error{Method: op.method(), Outcome: o}
	e.unknown = !op.idempotent && op.attempts > 0 && op.err != nil && !neverSent(op.err)
	return nil, e
}

// fail ends an operation that made no attempt.
func (op *operation) fail(err error, reason StopReason) (*http.Response, error) {
	op.stopErr = err
	return op.finish(nil, reason, nil)
}

// observed reports whether anything receives the operation's Outcome.
func (op *operation) observed() bool {
	return op.out != nil || op.t.OnDone != nil || op.t.Logger != nil
}

func (op *operation) outcome(reason StopReason) Outcome {
	o := Outcome{
		Attempts: op.attempts,
		Reason:   reason,
		Status:   op.status,
		Err:      op.err,
		Waited:   op.waited,
	}
	if op.stopErr != nil {
		o.Err = op.stopErr
	}
	if op.timed {
		o.Elapsed = op.clock.Since(op.start)
	}
	return o
}

func (op *operation) method() string {
	if op.req.Method == "" {
		return http.MethodGet
	}
	return op.req.Method
}
