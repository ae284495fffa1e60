package redisretry

import (
	"context"
	"math"
	"slices"
	"time"
)

// A refund gives a token back to the bucket it came from. Refund takes no
// argument, so the Budget keeps a record of every token it withdrew from
// the local bucket for an operation still running, and a refund made
// while one is open goes to the local bucket, even after the Budget went
// back to the shared one. Otherwise a token taken from the local bucket
// during an outage and refunded after Redis answered again would be
// added to the shared bucket, which never gave it. When the records and
// the refund belong to different operations, the token goes to the local
// bucket: the shared one never gains a token it did not lose.
//
// A refund takes the record whose operation's context ended first, and
// one of a live operation only when no context has ended: a record that
// is about to be forgotten must be the one spent, never the record of an
// operation that may still refund (whose context never ends, say) long
// after the grace.
//
// A record ends with its refund, or grantGrace after its operation's
// context ended (a retry whose wait was cut short by its caller's
// cancellation is refunded just after the context ended; the Transport
// refunds nothing once its operation has returned). A context that never
// ends (context.Background(), which a request without a deadline has)
// gives no such end: its record stays until a refund takes it.
//
// The records are bounded: operations may share a context that ends only
// at shutdown, or none, whose records would otherwise pile up for as long
// as an outage lasts. A new record past the bound replaces the oldest,
// which is only counted from then on (unrecorded), and a refund that
// finds no record but such a count goes to the local bucket too. So no
// refund of a local token ever reaches the shared bucket; the price is
// that, after an outage of more local withdrawals than the bound, as many
// later refunds of shared tokens go to the local bucket, which makes the
// shared one only stricter.

// grantGrace is how long a record outlives its operation's context.
const grantGrace = 2 * time.Second

// maxGrantRecords bounds the records: some hundreds of kilobytes.
const maxGrantRecords = 4096

// localGrant is a token withdrawn from the local bucket for an operation
// still running.
type localGrant struct {
	ctx   context.Context // the operation's
	stop  func() bool     // unregisters the forgetting after the operation's end
	ended uint64          // 0 until the forgetting is scheduled; then its rank among those; guarded by grantsMu
}

// endRank orders the records for a refund: 0 while the operation runs,
// else the rank of its end, the earliest first; an end whose forgetting
// is not yet scheduled comes last among the ended. grantsMu must be held.
func (g *localGrant) endRank() uint64 {
	switch {
	case g.ended != 0:
		return g.ended
	case ended(g.ctx):
		return math.MaxUint64
	}
	return 0
}

// withdrawLocal withdraws from the local bucket and, when it grants a
// token, records it until a refund takes it or grantGrace after ctx ends
// (never, for a context that cannot end).
func (b *Budget) withdrawLocal(ctx context.Context) bool {
	if !b.local.Withdraw(ctx) {
		return false
	}
	g := &localGrant{ctx: ctx}
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	if len(b.grants) >= maxGrantRecords {
		b.grants[0].stop()
		b.grants = slices.Delete(b.grants, 0, 1)
		b.unrecorded++
	}
	b.grants = append(b.grants, g)
	// Set under the lock: forgetGrant and takeGrant take it first. On a
	// context that cannot end, AfterFunc registers nothing.
	g.stop = context.AfterFunc(ctx, func() {
		b.endGrant(g)
		time.AfterFunc(grantGrace, func() { b.forgetGrant(g) })
	})
	return true
}

// endGrant marks g's operation as ended, after those that ended before.
func (b *Budget) endGrant(g *localGrant) {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	b.grantEnds++
	g.ended = b.grantEnds
}

// forgetGrant drops g's record, if a refund has not taken it.
func (b *Budget) forgetGrant(g *localGrant) {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	if i := slices.Index(b.grants, g); i >= 0 {
		b.grants = slices.Delete(b.grants, i, i+1)
	}
}

// takeGrant removes one record of a local token still out, or one of
// those counted past the bound, and reports whether there was one. It
// takes the record whose operation ended first, or else the newest.
func (b *Budget) takeGrant() bool {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	if len(b.grants) == 0 {
		if b.unrecorded > 0 {
			b.unrecorded--
			return true
		}
		return false
	}
	i, rank := len(b.grants)-1, uint64(0)
	for j, g := range b.grants {
		if r := g.endRank(); r != 0 && (rank == 0 || r < rank) {
			i, rank = j, r
		}
	}
	b.grants[i].stop()
	b.grants = slices.Delete(b.grants, i, i+1)
	return true
}

// openGrants returns how many local tokens are recorded as out.
func (b *Budget) openGrants() int {
	b.grantsMu.Lock()
	defer b.grantsMu.Unlock()
	return len(b.grants)
}
