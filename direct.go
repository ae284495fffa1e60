package httpretry

import (
	"context"
	"net/http"

	"github.com/httpretry/httpretry/internal/tried"
	"github.com/httpretry/httpretry/throttle"
)

// This file holds the first attempt of an operation that needs nothing
// around it: the caller's request itself, sent to Base on the caller's
// goroutine. When Transient calls its answer final, RoundTrip returns it
// at once; otherwise the operation's loop (operation.go) takes the answer
// over as its first attempt's, as if it had sent it.

// direct reports whether t leaves the first attempt of its operations as
// it is: no Hedging or learned limit, no time limit, Propagate, or hook
// that sees an attempt or judges a request or an answer, no response read
// into memory. Nothing then needs the clock, a derived context or a copy
// of the request, unless the request does (sendsDirect), or a Throttle
// whose destination is not idle does (first.send).
func (t *Transport) direct() bool {
	return t.Hedging == nil && t.LearnAttemptTimeout == nil &&
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

// firstAttempt is what an operation's first attempt, sent directly,
// produced (normalised: exactly one of resp and err is set, a resp has a
// Body), and the destination's state in the Throttle, when one is set,
// looked up once for the operation.
type firstAttempt struct {
	sent bool
	resp *http.Response
	err  error
	dest *throttle.Dest
}

// send sends req to base as the operation's first attempt, unless the
// Throttle's state of its destination is not idle: admitting it then
// takes the operation's loop. It deposits into the budget first, unless
// an outer layer owns retries (owned). It returns the answer, and true,
// when Transient calls it final, after telling the Throttle how it went;
// otherwise the loop takes it over (adopt).
func (f *firstAttempt) send(t *Transport, req *http.Request, base http.RoundTripper, owned bool) (*http.Response, bool) {
	th := t.Throttle
	if th != nil {
		if f.dest = th.Dest(req); !f.dest.Idle() {
			return nil, false
		}
	}
	if !owned {
		t.budgetFor(req).Deposit()
	}
	resp, err := base.RoundTrip(req)
	resp, err = normalize(base, req, resp, err)
	if err == nil && !IsTransient(resp, nil) {
		if th != nil {
			var r throttle.Result
			clock := t.clock()
			answer(&r, resp, nil, clock)
			th.Record(f.dest, &r, clock)
		}
		return resp, true
	}
	f.sent, f.resp, f.err = true, resp, err
	return nil, false
}

// adopt makes a, the operation's attempt, the first attempt that was
// sent directly and answered first: as open and send would have left it.
func (a *attempt) adopt(op *operation, first *firstAttempt) {
	op.attempts = 1
	*a = attempt{number: 1, req: op.req}
	op.unsent = holdsNothing
	a.resp, a.err = a.complete(op, a.req, first.resp, first.err)
}
