package httpretry

import (
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
