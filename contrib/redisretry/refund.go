package redisretry

import (
	"context"
	"slices"
)

// A refund gives a token back to the bucket it came from. Refund takes no
// argument, so the Budget keeps a record of every token it withdrew from
// the local bucket for an operation still running (whose context has not
// ended), and a refund made while one is open goes to the local bucket,
// even after the Budget went back to the shared one. Otherwise a token
// taken from the local bucket during an outage and refunded after Redis
// answered again would be added to the shared bucket, which never gave it.
// When the records and the refund belong to different operations, the
// token goes to the local bucket: the shared one never gains a token it
// did not lose.

// localGrant is a token withdrawn from the local bucket for an operation
// still running.
type localGrant struct{}

// withdrawLocal withdraws from the local bucket and, when it grants a
// token for an operation that ends (ctx has a Done channel), records it
// until ctx ends. An operation whose context never ends is not recorded:
// the record would live for ever.
func (b *Budget) withdrawLocal(ctx context.Context) bool {
	if !b.local.Withdraw(ctx) {
		return false
	}
	if ctx.Done() == nil {
		return true
	}
	g := &localGrant{}
	b.grantsMu.Lock()
	b.grants = append(b.grants, g)
	b.grantsMu.Unlock()
	context.AfterFunc(ctx, func() { b.forgetGrant(g) })
	return true
}

// forgetGrant drops g's record, if a refund has not taken it.
func (b *Budget) forgetGrant(g *localGrant) {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	if i := slices.Index(b.grants, g); i >= 0 {
		b.grants = slices.Delete(b.grants, i, i+1)
	}
}

// takeGrant removes one record of a local token still out and reports
// whether there was one.
func (b *Budget) takeGrant() bool {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	if len(b.grants) == 0 {
		return false
	}
	b.grants = b.grants[:len(b.grants)-1]
	return true
}

// openGrants returns how many local tokens are recorded as out.
func (b *Budget) openGrants() int {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	return len(b.grants)
}
