package redisretry

import (
	"context"
	"slices"
	"time"
)

// A refund gives a token back to the bucket it came from. Refund takes no
// argument, so the Budget keeps a record of every token it withdrew from
// the local bucket for an operation still running (whose context has not
// ended, or ended less than grantGrace ago: a retry whose wait was cut
// short by its caller's cancellation is refunded just after the context
// ended), and a refund made while one is open goes to the local bucket,
// even after the Budget went back to the shared one. Otherwise a token
// taken from the local bucket during an outage and refunded after Redis
// answered again would be added to the shared bucket, which never gave it.
// When the records and the refund belong to different operations, the
// token goes to the local bucket: the shared one never gains a token it
// did not lose.
//
// The records are bounded: operations may share a context that ends only
// at shutdown, whose records would otherwise pile up for as long as an
// outage lasts. A new record past the bound replaces the oldest, whose
// refund, if it ever comes, goes to the shared bucket: the bound is far
// above the local tokens running operations hold out at once.

// grantGrace is how long a record outlives its operation's context.
const grantGrace = 2 * time.Second

// maxGrantRecords bounds the records: some hundreds of kilobytes.
const maxGrantRecords = 4096

// localGrant is a token withdrawn from the local bucket for an operation
// still running.
type localGrant struct {
	stop func() bool // unregisters the forgetting after the operation's end
}

// withdrawLocal withdraws from the local bucket and, when it grants a
// token for an operation that ends (ctx has a Done channel), records it
// until grantGrace after ctx ends. An operation whose context never ends is not recorded:
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
	defer b.grantsMu.Unlock()
	if len(b.grants) >= maxGrantRecords {
		b.grants[0].stop()
		b.grants = slices.Delete(b.grants, 0, 1)
	}
	b.grants = append(b.grants, g)
	// Set under the lock: forgetGrant and takeGrant take it first.
	g.stop = context.AfterFunc(ctx, func() { time.AfterFunc(grantGrace, func() { b.forgetGrant(g) }) })
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
	last := len(b.grants) - 1
	b.grants[last].stop()
	b.grants = b.grants[:last]
	return true
}

// openGrants returns how many local tokens are recorded as out.
func (b *Budget) openGrants() int {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	return len(b.grants)
}
