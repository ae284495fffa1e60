package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// Attempt describes one attempt, as reported to [Transport.OnAttempt].
type Attempt struct {
	// Number is the attempt's position in its operation, 1 for the initial
	// attempt.
	Number int
	// Status is the response's status code, 0 when there was no response.
	Status int
	// Err is the attempt's error, nil when a response came.
	Err error
	// Duration is the time from sending the attempt to its response
	// headers or its error.
	Duration time.Duration
	// Wait is the wait scheduled before the next attempt, 0 when none
	// follows. The caller may cut it short: [Transport.OnWait] reports
	// the time actually waited.
	Wait time.Duration
	// RetryAfter is the part of Wait the server asked for (Retry-After or
	// a millisecond form); 0 when the wait is the Transport's own backoff.
	RetryAfter time.Duration

	// The fields below say where the attempt's time went, as Base reported
	// it through [net/http/httptrace] (any Base built on [http.Transport]
	// does). They are measured only when OnAttempt or Logger is set, so
	// that an unobserved Transport pays nothing for them; each duration is
	// zero when its phase did not happen (a reused connection has no DNS,
	// connect or TLS phase).

	// Conn says whether the attempt reused an idle connection or opened a
	// new one; [ConnUnknown] when Base reported neither.
	Conn ConnUse
	// ConnWait is the time from asking for a connection until having one.
	ConnWait time.Duration
	// DNS, Connect and TLSHandshake are the phases of a new connection,
	// measured only with [Transport.DialTrace].
	DNS          time.Duration
	Connect      time.Duration
	TLSHandshake time.Duration
	// Hedge is set when the attempt was a hedge: sent while an earlier
	// attempt of the operation was still running (see [Hedging]).
	Hedge bool
	// Canceled is set when the attempt lost to another one.
	Canceled bool

	// FirstByte is the time from sending the attempt to the response's
	// first byte.
	FirstByte time.Duration
}

// Wait describes one wait of an operation once it ended, as reported to
// Transport.OnWait, whether it ran its course or was cut short.
type Wait struct {
	// After is the number of the attempt the wait followed; 0 for a wait
	// before the first attempt (a spent quota waited for, with
	// [Throttle.WaitQuota]).
	After int
	// Waited is the time actually waited. The Waited of an operation's
	// waits add up to its [Outcome.Waited].
	Waited time.Duration
	// RetryAfter is the part of Waited the server asked for (Retry-After,
	// or a spent quota's reset); it comes first, so a wait cut short loses
	// its jitter first.
	RetryAfter time.Duration
}

// ConnUse says whether an attempt reused a connection. Its values are a
// small fixed set, safe to use as a metric label.
type ConnUse string

// The ways an attempt can get its connection.
const (
	// ConnUnknown: Base reported no connection (it failed before having
	// one, or is not built on net/http).
	ConnUnknown ConnUse = ""
	// ConnNew: the attempt dialed a new connection.
	ConnNew ConnUse = "new"
	// ConnReused: the attempt reused an idle connection from the pool.
	ConnReused ConnUse = "reused"
)

// Outcome describes a whole operation: one call of RoundTrip, with all its
// attempts and waits. It is reported to [Transport.OnDone], stored by
// [WithOutcome], and embedded in [Error].
type Outcome struct {
	// Attempts is the number of attempts sent, including the first.
	Attempts int
	// Reason is why no further attempt was made.
	Reason StopReason
	// Status is the last attempt's response status, 0 if it ended in an
	// error.
	Status int
	// Err is the last attempt's error, or the context's error when a wait
	// was canceled; nil if the operation ended with a response.
	Err error
	// Waited is the time spent waiting between attempts (and for a spent
	// quota): the sum of the waits reported to [Transport.OnWait].
	Waited time.Duration
	// Elapsed is the time from the start of RoundTrip until it returned.
	Elapsed time.Duration
	// Unknown is set when a request not safe to repeat ended without a
	// response after it may have reached the server; the error then matches
	// [ErrOutcomeUnknown].
	Unknown bool
	// BodySize is, when Reason is [BodyNotRewindable], the size of the body
	// that could not be sent again.
	BodySize int64

	// Hedges is the number of hedges sent: attempts started while an
	// earlier one was still running. They count in Attempts.
	Hedges int
	// HedgesRefused is the number of hedges refused: by the extra-load cap,
	// the Budget, or the Throttle (as it would refuse a retry).
	HedgesRefused int
	// LosersCanceled is the number of attempts still running when another
	// won.
	LosersCanceled int
	// Winner is the number of the attempt whose response a hedged operation
	// returned; 0 when it returned none or was not hedged.
	Winner int
	// HedgeWon is set when the returned response was a hedge's.
	HedgeWon bool
}

// ErrOutcomeUnknown is matched by [errors.Is] on the error of a request that
// is not safe to repeat and whose last attempt failed (or was canceled)
// after it may have reached the server. The server may or may not have
// applied it: reconcile through the API's own means (a status lookup, an
// idempotency key) rather than sending it again.
var ErrOutcomeUnknown = errors.New("httpretry: outcome unknown: the request may have been applied")

// Error is the error RoundTrip returns when an operation ends without a
// response. Its message names the method, the attempts and the reason,
// never the URL, headers or body. [http.Client] wraps it in a [*url.Error];
// [errors.As] finds it through that.
type Error struct {
	// Method is the request's method.
	Method string
	Outcome
}

// Error returns a message such as
// "httpretry: GET: 3 attempts: attempts_exhausted: connection refused".
func (e *Error) Error() string {
	b := make([]byte, 0, 96)
	b = append(b, "httpretry: "...)
	b = append(b, e.Method...)
	b = append(b, ": "...)
	b = strconv.AppendInt(b, int64(e.Attempts), 10)
	if e.Attempts == 1 {
		b = append(b, " attempt: "...)
	} else {
		b = append(b, " attempts: "...)
	}
	b = append(b, e.Reason...)
	if e.Reason == BodyNotRewindable {
		b = append(b, ": a request body of "...)
		b = strconv.AppendInt(b, e.BodySize, 10)
		b = append(b, " bytes without GetBody cannot be sent again"...)
	}
	if e.Unknown {
		b = append(b, ": outcome unknown"...)
	}
	if err := e.Err; err != nil {
		// A *url.Error from a Base built on http.Client would repeat the
		// URL, query string included; keep only what it wraps.
		var uerr *url.Error
		if errors.As(err, &uerr) && uerr.Err != nil {
			err = uerr.Err
		}
		b = append(b, ": "...)
		b = append(b, err.Error()...)
	}
	return string(b)
}

// Unwrap returns the last attempt's error, Outcome.Err.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is [ErrOutcomeUnknown] and applies to e.
func (e *Error) Is(target error) bool {
	return target == ErrOutcomeUnknown && e.Unknown
}

// Timeout reports whether a deadline ended the operation: the Transport
// stopped for lack of time, the caller's deadline passed, or the last
// attempt timed out. [http.Client] and [net.Error] callers check it.
func (e *Error) Timeout() bool {
	if e.Reason == DeadlineExhausted || errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// outcomeKey is the context key of WithOutcome.
type outcomeKey struct{}

// WithOutcome returns a context that asks the Transport to fill *o with the
// operation's [Outcome] when RoundTrip returns, like
// [net/http/httptrace.WithClientTrace]:
//
//	var o httpretry.Outcome
//	req = req.WithContext(httpretry.WithOutcome(req.Context(), &o))
//	resp, err := client.Do(req)
//	// o.Attempts, o.Reason, o.Waited ...
//
// A nil o returns ctx unchanged.
func WithOutcome(ctx context.Context, o *Outcome) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, outcomeKey{}, o)
}

// outcomeFrom returns the *Outcome stored by WithOutcome, or nil.
func outcomeFrom(ctx context.Context) *Outcome {
	o, _ := ctx.Value(outcomeKey{}).(*Outcome)
	return o
}

// finish ends the operation after its last attempt, a: it reports the
// outcome and returns resp with a nil error when there is one, or a
// *Error.
func (op *operation) finish(a *attempt, resp *http.Response, reason StopReason) (*http.Response, error) {
	if resp != nil {
		if op.out != nil || op.t.OnDone != nil || op.t.Logger != nil {
			o := op.outcome(a, reason)
			if op.h != nil {
				o.Winner, o.HedgeWon = a.number, a.hedge
			}
			op.report(a, o)
		}
		a.release(resp, op.cancel)
		return resp, nil
	}
	if reason == Canceled && op.stopErr == nil {
		// Base may report a canceled attempt in its own words; the
		// caller's context error must still be in the chain.
		if cerr := withCause(op.callerCtx, op.callerErr()); !errors.Is(a.err, cerr) {
			op.stopErr = fmt.Errorf("%w (attempt: %w)", cerr, a.err)
		}
	}
	o := op.outcome(a, reason)
	// A request that is not safe to repeat, whose last attempt failed
	// without proof that nothing was sent, may have been applied. (An
	// attempt's err is only ever set by the attempt.)
	o.Unknown = !op.idempotent && a.err != nil && !a.unsent
	op.report(a, o)
	a.end()
	if op.cancel != nil {
		op.cancel()
	}
	return nil, &Error{Method: reqMethod(op.req), Outcome: o}
}

// release hands the returned response's body the contexts it must
// release when the caller is done with it, the attempt's and the
// operation's (cancelOp); a body already in memory releases them now.
func (a *attempt) release(resp *http.Response, cancelOp context.CancelFunc) {
	if a.buffered {
		// Nothing more will be read from the network.
		a.end()
		if cancelOp != nil {
			cancelOp()
		}
		return
	}
	wrapBody(resp, a.cancelAttempt, cancelOp, a.idle)
}

// fail ends an operation that made no attempt. A body that could not be
// buffered because the caller left, or the operation's Timeout passed,
// stops as an attempt would have; none is the attempt never made.
func (op *operation) fail(none *attempt, err error) (*http.Response, error) {
	op.stopErr = err
	// Each is asked only when the ones before it did not hold, as
	// refusedBefore orders them: done reads the context only then.
	ended := op.callerEnded()
	if ended && !errors.Is(err, op.callerErr()) {
		// The quota's wait, or the body's read, ended for the caller:
		// its context's error, and cause, are in the chain.
		op.stopErr = fmt.Errorf("%w (%w)", withCause(op.callerCtx, op.callerErr()), err)
	}
	throttled := !ended && errors.Is(err, throttle.ErrThrottled)
	timedOut := !ended && !throttled && done(op.ctx)
	return op.finish(none, nil, refusedBefore(ended, throttled, timedOut))
}

// outcome is the operation's Outcome, stopped for reason after its last
// attempt, a.
func (op *operation) outcome(a *attempt, reason StopReason) Outcome {
	o := Outcome{
		Attempts: op.attempts,
		Reason:   reason,
		Status:   a.status,
		Err:      a.err,
		Waited:   op.waited,
	}
	if h := op.h; h != nil {
		o.Hedges, o.HedgesRefused, o.LosersCanceled = h.hedges, h.refused, h.losers
	}
	if op.stopErr != nil {
		o.Err = op.stopErr
	}
	if op.timed {
		o.Elapsed = op.clock.Since(op.start)
	}
	if reason == BodyNotRewindable {
		o.BodySize = op.body.size(op.req)
	}
	return o
}
