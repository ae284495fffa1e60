package httpretry

import (
	"fmt"
	"net/http"
)

// This file settles how each attempt is made from the caller's request,
// which is never modified: a generated idempotency key, a buffered or
// tracked body, and a fresh body for every retry.

// prepare settles how attempts are made from the caller's request: it adds
// a generated idempotency key, buffers or wraps a body that has no
// GetBody, and decides whether the request may be repeated.
func (op *operation) prepare() error {
	req, t := op.req, op.t
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		op.body = bodyNone
	case req.GetBody != nil:
		op.body = bodyGetBody
	case op.maxAttempts > 1 && req.ContentLength > 0 && req.ContentLength <= t.bufferRequest():
		r, err := bufferBody(req)
		if err != nil {
			return fmt.Errorf("httpretry: reading request body: %w", err)
		}
		op.tmpl, op.body = r, bodyGetBody
	default:
		op.once = &onceBody{rc: req.Body}
		op.tracker = &readTracker{body: op.once}
		op.tmpl = req.WithContext(op.callerCtx)
		op.tmpl.Body = op.tracker
		op.body = bodyOnce
	}
	op.idempotent = t.idempotent(op.tmpl)
	if !op.idempotent && op.maxAttempts > 1 && t.NewIdempotencyKey != nil && !hasIdempotencyKey(req.Header) {
		// One key per operation, the same on every attempt: a new key
		// would name a new operation.
		r := op.tmpl.Clone(op.callerCtx)
		r.Header.Set(IdempotencyKeyHeader, t.NewIdempotencyKey())
		op.tmpl = r
		op.idempotent = t.idempotent(op.tmpl)
	}
	return nil
}

// rewind reports whether the request body can be sent again after err,
// obtaining the next attempt's body from GetBody when there is one.
func (op *operation) rewind(err error) bool {
	switch op.body {
	case bodyGetBody:
		b, gerr := op.tmpl.GetBody()
		if gerr != nil || b == nil {
			return false
		}
		op.nextBody = b
		return true
	case bodyOnce:
		// Rewind only what was never read: after a dial error the body
		// is still whole.
		return err != nil && neverSent(err) && !op.tracker.didRead.Load()
	}
	return true
}

// dropNextBody closes a body obtained for a retry that will not happen.
func (op *operation) dropNextBody(reason StopReason) decision {
	if op.nextBody != nil {
		op.nextBody.Close()
		op.nextBody = nil
	}
	return decision{stop: reason}
}
