package redisretry

import (
	"context"
	"sync"
)

// A burst of failures in one process asks the bucket for many tokens at
// once: two hundred requests that fail together each call Withdraw before
// the first answer comes back, and each, finding no lease and no refusal
// remembered, would send a script of its own, one per failing operation.
// So the asks of one process fly together (single flight): a Withdraw
// that must ask Redis while the call of another is in flight waits for
// that call instead of sending its own, and a call asks, besides its
// lease, for one token for every other Withdraw waiting to ask. When the
// call lands, the waiters take their tokens from what it leased; when it
// found the bucket empty, they are refused with it (and remember the
// refusal, as its caller does); when Redis failed, they use the local
// bucket. A waiter that finds none of these (its caller left, or a new
// Withdraw took the lease first) asks again: a Withdraw waits for at most
// one call besides its own.

// flight is one Redis call of a Withdraw that others wait for.
type flight struct {
	done  chan struct{} // closed when the call has landed
	empty bool          // the reply left less than a whole token: the waiters are refused
}

// flights holds the call in flight of one Budget's Withdraws.
type flights struct {
	mu  sync.Mutex // protects cur
	cur *flight    // the call in flight, or nil
}

// board returns the call in flight to wait for, or, when there is none, a
// new one that the caller makes (lead).
func (fs *flights) board() (f *flight, lead bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.cur != nil {
		return fs.cur, false
	}
	fs.cur = &flight{done: make(chan struct{})}
	return fs.cur, true
}

// land ends f, whose reply left the bucket empty or not, and wakes its
// waiters.
func (fs *flights) land(f *flight, empty bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.empty = empty
	fs.cur = nil
	close(f.done)
}

// withdrawShared is Withdraw in the shared state, once no lease or
// remembered refusal answered: it makes the call of the process, or waits
// for the one in flight and takes its share of what it brought.
func (b *Budget) withdrawShared(ctx context.Context) bool {
	b.asking.Add(1)
	defer b.asking.Add(-1)
	for waited := false; ; {
		f, lead := b.flights.board()
		if lead && b.state.Load() != int32(Shared) {
			// The call just landed fell back: no new call.
			b.flights.land(f, false)
			return b.withdrawLocal(ctx)
		}
		if lead {
			granted, empty := b.ask(ctx)
			b.flights.land(f, empty)
			return granted
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return false
		}
		if b.state.Load() != int32(Shared) {
			return b.withdrawLocal(ctx)
		}
		if takeUnits(&b.leased, tokenUnit) {
			return true
		}
		if f.empty {
			b.addCredit(b.now().UnixNano())
			return takeUnits(&b.credit, tokenUnit)
		}
		if ended(ctx) {
			return false
		}
		if waited {
			// A second call landed without a token for this Withdraw
			// (new Withdraws took them first): it makes its own call,
			// outside the flights, rather than wait for a third.
			granted, _ := b.ask(ctx)
			return granted
		}
		waited = true
	}
}

// ask makes one call of bucketScript for a Withdraw: it carries the
// pending deposits, refunds, credit and leased tokens, and asks for the
// lease (reserveLease) and one token for every other Withdraw waiting to
// ask. It reports whether a token was granted to its caller, and whether
// the reply left the bucket with less than a whole token (empty). When
// Redis fails it falls back to the local bucket and withdraws there.
func (b *Budget) ask(ctx context.Context) (granted, empty bool) {
	leased, credit := b.takeHeld(true)
	add := min(leased+credit+b.takePending(), b.capacity)
	want, asked := b.reserveLease()
	want += max(b.asking.Load()-1, 0)
	r, err := b.send(ctx, scriptCall{nonce: b.nonces.next(), add: add, keep: min(leased, add), want: want, asked: asked}, 1)
	if err == nil {
		return r.granted > 0, r.tokens < tokenUnit
	}
	if ended(ctx) {
		// The caller left or ran out of time: no verdict on Redis, and no
		// retry for an operation that is over. What the call takes is
		// leased all the same (settle.go).
		return false, false
	}
	b.fallBack(err)
	return b.withdrawLocal(ctx), false
}
