package httpretry

import (
	"context"
	"net/http"

	"github.com/httpretry/httpretry/internal/tried"
)

// shareTried gives the operation's context a set of the addresses its
// attempts were sent to, when a Base chooses among a host's addresses
// (spread.Transport) and the operation may send more than one attempt:
// each retry and hedge then goes to an address not yet tried.
func (op *operation) shareTried() {
	var hedgeBase http.RoundTripper
	if op.t.Hedging != nil {
		hedgeBase = op.t.Hedging.Base
	}
	if op.policy.maxAttempts > 1 && tried.Wants(op.base, hedgeBase) {
		op.ctx, op.derived = tried.With(op.ctx), true
	}
}

// traceTried returns ctx with a trace that adds the address of each
// connection an attempt gets to the operation's tried set, when it has
// one, and whether it did: the address an attempt reached through a Base
// that does not choose addresses (a plain Base beside spread as
// Hedging.Base) then counts as tried for the hedges and retries that do.
func traceTried(ctx context.Context) (context.Context, bool) {
	s := tried.From(ctx)
	if s == nil {
		return ctx, false
	}
	return tried.WithConnTrace(ctx, s), true
}
