package redisretry

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// A call of bucketScript can take tokens that nobody ends up holding: its
// caller's context ends while the script runs (the caller reports false
// and leaves), or the call times out on a frozen Redis that runs it when
// it thaws. The bucket then lacks tokens no process will spend or return,
// for as long as the key lives. So every call is settled, whoever waits
// for it:
//
//   - A call runs on a goroutine of its own under its own bound,
//     CallTimeout from its start, whatever its caller's context says. An
//     answer that arrives after its caller left is settled by that
//     goroutine: the tokens it granted are leased, and the next flush
//     returns them.
//   - A call that fails or times out is kept, with its nonce, and
//     replayed before the next flush or probe: the same nonce, taking no
//     token, and adding only the leased tokens the call carried (they are
//     the bucket's; deposits and credit are dropped). If Redis ran the
//     call, the replay learns its answer from the nonce and leases what it
//     granted; if not, the replay runs in its place, and the call, should
//     a thawed Redis run it later, finds the nonce and takes nothing.
//
// A replay is safe only while the nonce lives (nonceTTL from the call's
// start: the script remembers it for that long from when it runs, which
// is later). A call not replayed by then is dropped, and with it the
// leased tokens it carried and whatever it took: the bucket is only
// stricter for it. The calls kept are bounded, the oldest dropped first.

// maxUnsettled bounds the calls kept for replay: far above the Withdraws
// a process has in flight when Redis fails, which each leave one.
const maxUnsettled = 256

// scriptCall is one run of bucketScript: what it carries and asks, under
// its nonce.
type scriptCall struct {
	nonce string
	add   int64 // units added
	keep  int64 // of add, the leased units: what a replay adds
	want  int64 // whole tokens taken at most (0 for a flush or a replay)
	asked int64 // of want, the tokens reserved beyond one (see reserveLease)
	start time.Time
	final bool // Close's last flush, allowed while Close waits for the others
}

// reply is the answer of bucketScript.
type reply struct {
	granted int64 // whole tokens taken
	tokens  int64 // units left in the bucket
}

// replayable reports whether a call started at start may still be
// replayed at now, under a nonce remembered for ttl after it runs.
func replayable(start, now time.Time, ttl time.Duration) bool {
	age := now.Sub(start)
	return age >= 0 && age < ttl
}

// handoff passes a call's answer from its goroutine to its caller, or
// tells the goroutine that the caller left and the answer is its own.
type handoff struct {
	state atomic.Int32 // 0 waiting, handedOver, or callerLeft
	done  chan result[reply]
}

const (
	handedOver = 1
	callerLeft = 2
)

// send runs c on a goroutine of its own, bounded by CallTimeout from now
// (ctx's values are kept, its end is not), and waits for the answer until
// ctx ends or the bound passes. spend is the tokens the caller spends from
// a grant it receives (1 for a Withdraw); the rest are leased. Whoever
// gets the answer settles it (settle), so that Close, waiting for the
// calls to settle, returns their leases.
func (b *Budget) send(ctx context.Context, c scriptCall, spend int64) (reply, error) {
	if !b.startCall(c.final, true) {
		// Not sent. A new call's leased tokens are still held, for
		// Close's last flush; a replayed call is kept, as it may have run.
		if c.start.IsZero() {
			b.leased.Add(c.keep)
		} else {
			b.keepUnsettled(c)
		}
		b.asked.Add(-c.asked)
		return reply{}, errClosed
	}
	if c.start.IsZero() {
		c.start = time.Now()
	}
	h := &handoff{done: make(chan result[reply], 1)}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.callTimeout())
	go func() {
		defer b.calls.Done()
		defer cancel()
		r, err := b.runScript(callCtx, c)
		// Out of flight before the answer is handed over: a probe that
		// follows the call at once must not find it still running.
		b.inflight.Add(-1)
		if h.state.CompareAndSwap(0, handedOver) {
			h.done <- result[reply]{r, err}
			return
		}
		b.settle(c, r, err, 0)
	}()
	wait, stop := context.WithTimeout(ctx, b.callTimeout())
	defer stop()
	var got result[reply]
	select {
	case got = <-h.done:
	case <-wait.Done():
		if h.state.CompareAndSwap(0, callerLeft) {
			return reply{}, b.wrap(wait.Err())
		}
		got = <-h.done // handed over just now
	}
	if got.err != nil || got.v.granted == 0 {
		spend = 0
	}
	b.settle(c, got.v, got.err, spend)
	return got.v, got.err
}

// settle accounts for c's answer once: the tokens granted beyond spend
// are leased, the reservation of c is released, and a call that failed is
// kept for replay. It ends c's part in Close's wait.
func (b *Budget) settle(c scriptCall, r reply, err error, spend int64) {
	defer b.settling.Done()
	if err != nil {
		b.keepUnsettled(c)
	} else {
		if c.want > 0 {
			b.remember(r.granted, r.tokens)
		}
		if lease := r.granted - spend; lease > 0 {
			b.leased.Add(lease * tokenUnit)
		}
	}
	// After the lease is added: reserveLease reads asked first, so it
	// never misses both.
	b.asked.Add(-c.asked)
}

// keepUnsettled keeps c for replay, as a call that adds only its leased
// units and takes nothing.
func (b *Budget) keepUnsettled(c scriptCall) {
	if c.keep == 0 && c.want == 0 {
		return // a replay would learn nothing and return nothing
	}
	c.add, c.want, c.asked, c.final = c.keep, 0, 0, false
	b.unsettledMu.Lock()
	defer b.unsettledMu.Unlock()
	if len(b.unsettled) >= maxUnsettled {
		b.unsettled = slices.Delete(b.unsettled, 0, 1)
	}
	b.unsettled = append(b.unsettled, c)
}

// takeUnsettled returns the calls kept for replay that may still be
// replayed, and forgets them all.
func (b *Budget) takeUnsettled() []scriptCall {
	b.unsettledMu.Lock()
	defer b.unsettledMu.Unlock()
	if len(b.unsettled) == 0 {
		return nil
	}
	now, ttl := time.Now(), time.Duration(nonceTTL(b.callTimeout()))*time.Millisecond
	calls := slices.DeleteFunc(b.unsettled, func(c scriptCall) bool { return !replayable(c.start, now, ttl) })
	b.unsettled = nil
	return calls
}

// replay sends the calls kept for replay, one at a time, and reports
// whether any was sent and the first failure; the failed call and those
// after it are kept for the next replay.
func (b *Budget) replay(ctx context.Context, final bool) (sent bool, err error) {
	calls := b.takeUnsettled()
	for i, c := range calls {
		c.final = final
		if _, err = b.send(ctx, c, 0); err != nil {
			// send kept c; keep those after it.
			for _, rest := range calls[i+1:] {
				b.keepUnsettled(rest)
			}
			return true, err
		}
	}
	return len(calls) > 0, nil
}

// reserveLease returns how many tokens a Withdraw asks for and how many
// of them it reserves beyond its own one: the leases one process holds,
// with those its Withdraws in flight asked for, stay within MaxLease.
func (b *Budget) reserveLease() (want, asked int64) {
	for {
		// asked before leased: settle adds a lease before it releases
		// its reservation, so a tally missing both is impossible.
		inFlight := b.asked.Load()
		held := inFlight + b.leased.Load()/tokenUnit
		want = leaseWant(b.lastTokens.Load(), b.fleetSize(), b.maxLease(), held)
		if b.asked.CompareAndSwap(inFlight, inFlight+want-1) {
			return want, want - 1
		}
	}
}

// startCall admits a Redis call, counting it in flight, unless Close
// stopped calls: all of them once it is done, and, while it waits for
// the calls in flight to settle, all but its own last flush (final).
// settled calls are also counted for that wait.
func (b *Budget) startCall(final, settled bool) bool {
	b.callMu.Lock()
	defer b.callMu.Unlock()
	if b.closed || (b.draining && !final) {
		return false
	}
	b.calls.Add(1)
	b.inflight.Add(1)
	if settled {
		b.settling.Add(1)
	}
	return true
}
