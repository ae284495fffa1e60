package httpretry

import (
	"context"
	"net/http"

	"github.com/httpretry/httpretry/internal/tried"
)

// This file holds the first attempt of an operation that needs nothing
// around it: the caller's request itself, sent to Base on the caller's
// goroutine. When Transient calls its answer final, RoundTrip returns it
// at once; otherwise the operation's loop (operation.go) takes the answer
// over as its first attempt's, as if it had sent it.

// direct reports whether t leaves the first attempt of its operations as
// it is: no Throttle, Hedging or learned limit, no time limit,
// Propagate, or hook that sees an attempt or judges a request or an
// answer, no response read into memory. Nothing then needs the clock, a
// derived context or a copy of the request, unless the request does
// (sendsDirect).
func (t *Transport) direct() bool {
	return t.Hedging == nil && t.Throttle == nil && t.LearnAttemptTimeout == nil &&
		t.Timeout <= 0 && t.AttemptTimeout <= 0 && t.IdleTimeout <= 0 && !t.Propagate &&
		t.OnAttemptStart == nil && t.OnAttempt == nil && t.OnDone == nil &&
		t.Transient == nil && t.Idempotent == nil && t.BufferResponse <= 0
}

// sendsDirect reports whether req, made with ctx, can be sent as it is as
// the first attempt of an operation of a direct Transport: it has no body
// to track or rewind, it is safe to repeat (no connection trace must
// prove it unsent), nothing asks for clock readings (a deadline) or an
// Outcome, no tried set of an outer operation waits for its address, and,
// when the operation may retry (retries), Base is an *http.Transport: any
// other Base needs the context that marks retries as owned, or a tried
// set of its own.
func sendsDirect(req *http.Request, ctx context.Context, base http.RoundTripper, retries bool) bool {
	if hasBody(req) || !IsIdempotent(req) || outcomeFrom(ctx) != nil || tried.From(ctx) != nil {
		return false
	}
	if _, ok := ctx.Deadline(); ok {
		return false
	}
	_, plain := base.(*http.Transport)
	return plain || !retries
}

// firstAnswer is what the first attempt, sent directly, produced: normalised
// (exactly one of resp and err is set, a resp has a Body), or nothing
// when it was not sent.
type firstAnswer struct {
	sent bool
	resp *http.Response
	err  error
}

// adopt makes a, the operation's attempt, the first attempt that was
// sent directly and answered first: as open and send would have left it.
func (a *attempt) adopt(op *operation, first *firstAnswer) {
	op.attempts = 1
	*a = attempt{number: 1, req: op.req}
	op.unsent = holdsNothing
	a.resp, a.err = a.complete(op, a.req, first.resp, first.err)
}
