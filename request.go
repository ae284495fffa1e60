package httpretry

import (
	"fmt"
	"net/http"
)

// This file settles how each attempt is made from the caller's request,
// which is never modified: a generated idempotency key, a buffered or
// tracked body, and whether the request may be repeated.

// prepare settles how attempts are made from the caller's request: it adds
// a generated idempotency key, buffers a body of known length that has no
// GetBody or tracks one that cannot be buffered, and decides whether the
// request may be repeated.
func (op *operation) prepare() error {
	req, t := op.req, op.t
	if !hasBody(req) {
		op.body.kind = bodyNone
	} else if req.GetBody != nil {
		op.body.kind = bodyGetBody
	} else if op.policy.maxAttempts == 1 {
		// Nothing will be sent again: the body goes to Base untouched,
		// and Base alone closes it, however long it streams.
		op.body.kind = bodyDirect
	} else if req.ContentLength > 0 && req.ContentLength <= t.bufferRequest() {
		op.body.owned = false // bufferBody closes it
		if err := op.buffer(); err != nil {
			return err
		}
	} else {
		op.body.owned = false // the onceBody closes it
		op.body.once = &onceBody{rc: req.Body}
		op.body.kind = bodyOnce
	}
	op.idempotent = t.idempotent(op.tmpl)
	if !op.idempotent && op.policy.maxAttempts > 1 && t.NewIdempotencyKey != nil && !hasIdempotencyKey(req.Header) {
		// One key per operation, the same on every attempt: a new key
		// would name a new operation.
		r := op.tmpl.Clone(op.callerCtx)
		if r.Header == nil {
			r.Header = make(http.Header, 1)
		}
		r.Header.Set(IdempotencyKeyHeader, t.NewIdempotencyKey())
		op.tmpl = r
		op.idempotent = t.idempotent(op.tmpl)
	}
	return nil
}

// hasBody reports whether req carries a body: neither none nor
// http.NoBody.
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

// buffer reads the caller's body into memory for the request template,
// within the operation's deadline and until the caller cancels, by its
// context or by the deprecated Request.Cancel.
func (op *operation) buffer() error {
	ctx, stop := withCancelChan(op.ctx, op.cancelChan())
	defer stop()
	r, err := bufferBody(ctx, op.req, op.t.bufferRequest())
	if err != nil {
		return fmt.Errorf("httpretry: reading request body: %w", err)
	}
	op.tmpl, op.body.kind = r, bodyGetBody
	return nil
}
