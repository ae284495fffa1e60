package httpretry

import (
	"log/slog"
	"net/http"
	"time"
)

// report reports the attempt, which just ended, to OnAttempt, with the
// wait scheduled before the next one (0 when none follows) and the part
// of it the server asked for, and releases its connection trace.
func (a *attempt) report(op *operation, d decision) {
	if op.t.OnAttempt != nil || a.trace != nil {
		a.reportTo(op, d)
	}
}

// reportTo is report's work when there is a hook to call or a trace to
// release, apart so that report inlines.
func (a *attempt) reportTo(op *operation, d decision) {
	if op.t.OnAttempt == nil {
		a.releaseTrace()
		return
	}
	r := Attempt{
		Number:     a.number,
		Hedge:      a.hedge,
		Canceled:   a.canceled,
		Status:     a.status,
		Err:        a.err,
		Duration:   a.elapsed,
		Wait:       d.wait,
		RetryAfter: d.retryAfter,
	}
	if a.trace != nil {
		a.trace.fill(&r)
		a.releaseTrace()
	}
	op.t.OnAttempt(op.req, r)
}

// releaseTrace returns the attempt's connection trace to its pool.
func (a *attempt) releaseTrace() {
	if a.trace != nil {
		a.trace.release()
		a.trace = nil
	}
}

// report delivers the operation's outcome to WithOutcome, OnDone and the
// Logger (for every stop but Final, about the last attempt, a).
func (op *operation) report(a *attempt, o Outcome) {
	if op.out != nil {
		*op.out = o
	}
	if op.t.OnDone != nil {
		op.t.OnDone(op.req, o)
	}
	if op.t.Logger != nil && o.Reason != Final {
		a.log(op, slog.LevelWarn, "httpretry: stop", 0, o.Reason)
	}
}

// requestAttrs starts a log record's attributes, with room for n, with
// what every record of op names: its method, host and LogRoute's route.
func requestAttrs(op *operation, n int) []slog.Attr {
	attrs := make([]slog.Attr, 0, n)
	attrs = append(attrs, slog.String("method", reqMethod(op.req)), slog.String("host", reqHost(op.req)))
	if op.t.LogRoute != nil {
		attrs = append(attrs, slog.String("route", op.t.LogRoute(op.req)))
	}
	return attrs
}

// log writes one record about the attempt, when the Transport has a
// Logger: a retry decided after it (reason "", with its wait), or the
// stop that followed it. It carries the request's method, host and, when
// LogRoute names one, its route only: the path, the query string,
// userinfo, headers and bodies may hold secrets and never reach a log.
// Errors appear as a class from a small fixed set, since their text can
// quote a URL.
func (a *attempt) log(op *operation, level slog.Level, msg string, wait time.Duration, reason StopReason) {
	if op.t.Logger == nil {
		return
	}
	attrs := requestAttrs(op, 9)
	attrs = append(attrs, slog.Int("attempt", a.number))
	if a.err != nil {
		attrs = append(attrs, slog.String("error", ErrorClass(a.err)))
	} else {
		attrs = append(attrs, slog.Int("status", a.status))
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

// reqHost is the host a log record names for req.
func reqHost(req *http.Request) string {
	if u := req.URL; u != nil {
		// URL.Host never holds userinfo; that is in URL.User.
		return u.Host
	}
	return req.Host
}

// reqMethod is req's method, GET when empty.
func reqMethod(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}
