package httpretry

import (
	"log/slog"
	"net/http"
	"time"
)

// onAttempt reports the attempt that just ended to OnAttempt, with the
// wait scheduled before the next one (0 when none follows) and the part
// of it the server asked for.
func (op *operation) onAttempt(d decision) {
	if op.t.OnAttempt != nil || op.trace != nil {
		op.reportAttempt(d)
	}
}

// reportAttempt is onAttempt's work when there is a hook to call or a
// trace to release, apart so that onAttempt inlines.
func (op *operation) reportAttempt(d decision) {
	if op.t.OnAttempt == nil {
		op.releaseTrace()
		return
	}
	a := Attempt{
		Number:     op.number,
		Hedge:      op.hedge,
		Canceled:   op.canceled,
		Status:     op.status,
		Err:        op.err,
		Duration:   op.lastElapsed,
		Wait:       d.wait,
		RetryAfter: d.retryAfter,
	}
	if op.trace != nil {
		op.trace.fill(&a)
		op.releaseTrace()
	}
	op.t.OnAttempt(op.req, a)
}

// releaseTrace returns the attempt's connection trace to its pool.
func (op *operation) releaseTrace() {
	if op.trace != nil {
		op.trace.release()
		op.trace = nil
	}
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
// method, host and, when LogRoute names one, its route only: the path,
// the query string, userinfo, headers and bodies may hold secrets and
// never reach a log. Errors appear as a class from a small fixed set,
// since their text can quote a URL.
func (op *operation) log(level slog.Level, msg string, wait time.Duration, reason StopReason) {
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String("method", op.method()), slog.String("host", op.host()))
	if op.t.LogRoute != nil {
		attrs = append(attrs, slog.String("route", op.t.LogRoute(op.req)))
	}
	attrs = append(attrs, slog.Int("attempt", op.number))
	if op.err != nil {
		attrs = append(attrs, slog.String("error", ErrorClass(op.err)))
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

func (op *operation) method() string {
	if op.req.Method == "" {
		return http.MethodGet
	}
	return op.req.Method
}
