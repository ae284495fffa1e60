package redisretry

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// During a fleet-wide outage every process fails together, and a Budget
// that asked Redis for every retry would put one command per failing
// operation on one key of one shard, exactly when the fleet is busiest.
// So a Budget answers from memory where it can:
//
//   - A refusal is remembered. When Redis refuses a token, or grants the
//     last whole one, the Budget refuses locally for RefusalMemory, drawn
//     anew each time between half of it and all of it so that the fleet's
//     processes do not ask again together (announce.go tells the rest of
//     the fleet).
//   - Deposits wait while the bucket is empty. While a refusal is
//     remembered, or the last reply left less than a whole token, the
//     deposits the process makes stay in it as credit: a bucket that
//     cannot hold a whole token gains nothing a retry could spend from a
//     fraction, and every whole token of credit pays for one of the
//     process's own retries without a Redis call. The credit goes to
//     Redis with the next Withdraw that asks, with a flush once it makes
//     a whole token or is maxCreditHold old, and with Close.
//   - A grant is leased. While the bucket holds plenty, a Withdraw takes
//     up to MaxLease tokens at once, about the bucket's share per process
//     (tokens/FleetSize), spends one, and spends the rest on the next
//     Withdraws without a Redis call. Every flush (each FlushInterval)
//     returns the tokens still leased, so a lease lives at most one
//     interval.
//
// None ever grants a token the shared bucket did not give or the
// process did not deposit: the fleet's retries stay within capacity +
// perRequest per operation. What they cost is evenness. A lease can hold
// up to MaxLease tokens in one process while another is refused, and
// credit serves only the process that deposited it, so while the bucket
// is empty a process sees retries in proportion to its own traffic, not
// to the fleet's.

// Defaults for the zero values of the Options fields of this file.
const (
	DefaultRefusalMemory = time.Second
	DefaultMaxLease      = 8
)

// maxCreditHold bounds how long credit stays in the process while the
// bucket is believed empty.
const maxCreditHold = 10 * time.Second

// holdCredit reports whether a flush keeps the credit in the process:
// while a refusal is remembered or the bucket is believed empty
// (emptyKnown), a credit of less than a whole token younger than
// maxCreditHold (age). A whole token goes to the bucket, where any process
// can spend it: a process whose own operations succeed refills the bucket
// for those that fail. A negative age means the wall clock went back
// since the credit started, and then the credit is sent: its age is no
// longer known, and the hold never outlives its bound.
func holdCredit(refusing, emptyKnown bool, credit int64, age time.Duration) bool {
	return (refusing || emptyKnown) && credit < tokenUnit && age >= 0 && age < maxCreditHold
}

// leaseWant returns how many whole tokens a Withdraw asks Redis for: the
// bucket's share per process, tokens/fleetSize as of the last reply, at
// least one, and at most what keeps the tokens the process holds beyond
// its Withdraws' own (held: leased, or asked for by Withdraws in flight)
// within maxLease.
func leaseWant(tokens int64, fleetSize, maxLease int, held int64) int64 {
	want := tokens / tokenUnit / int64(max(fleetSize, 1))
	return max(min(want, int64(max(maxLease, 1))-held), 1)
}

// refusedBy reports whether a reply tells the Budget to remember a
// refusal: nothing was granted, or the grant left less than a whole token.
func refusedBy(granted, tokensAfter int64) bool {
	return granted == 0 || tokensAfter < tokenUnit
}

// refusalEnd returns when a refusal remembered at now ends: after memory
// scaled by a factor between one half and one (from r in [0, 1)).
func refusalEnd(now int64, memory time.Duration, r float64) int64 {
	return now + int64(memory)/2 + int64(float64(memory/2)*r)
}

// refusalHolds reports whether a refusal remembered until until still
// answers at now. A refusal that seems to end more than memory after now
// (the wall clock went back) has ended: the memory never outlives its
// bound.
func refusalHolds(now, until int64, memory time.Duration) bool {
	return now < until && until-now <= int64(memory)
}

// takeUnits subtracts want units from v if it holds at least that many,
// and reports whether it did.
func takeUnits(v *atomic.Int64, want int64) bool {
	for {
		have := v.Load()
		if have < want {
			return false
		}
		if v.CompareAndSwap(have, have-want) {
			return true
		}
	}
}

func (b *Budget) refusalMemory() time.Duration {
	return durationOr(b.opts.RefusalMemory, DefaultRefusalMemory)
}

func (b *Budget) maxLease() int {
	if b.opts.MaxLease == 0 {
		return DefaultMaxLease
	}
	return max(b.opts.MaxLease, 1)
}

// refusing reports whether a remembered refusal still answers.
func (b *Budget) refusing() bool {
	if b.opts.RefusalMemory < 0 {
		return false
	}
	return refusalHolds(b.now().UnixNano(), b.refusedUntil.Load(), b.refusalMemory())
}

// remember records a refusal when the reply of a Withdraw calls for one
// (refusedBy).
func (b *Budget) remember(granted, tokensAfter int64) {
	if b.opts.RefusalMemory < 0 || !refusedBy(granted, tokensAfter) {
		return
	}
	b.refusedUntil.Store(refusalEnd(b.now().UnixNano(), b.refusalMemory(), rand.Float64()))
}

// withdrawLocally answers a Withdraw without Redis when it can: from a
// leased token, or, while a refusal is remembered, from a whole token of
// credit, else a refusal. ok is false when Redis must be asked.
func (b *Budget) withdrawLocally() (granted, ok bool) {
	if takeUnits(&b.leased, tokenUnit) {
		return true, true
	}
	if !b.refusing() {
		return false, false
	}
	b.addCredit(b.now().UnixNano())
	return takeUnits(&b.credit, tokenUnit), true
}

// takeDeposits returns the pending deposits in units, capped at capacity,
// and resets them.
func (b *Budget) takeDeposits() int64 {
	if b.deposits.Load() == 0 {
		return 0
	}
	return times(b.deposits.Swap(0), b.perRequest, b.capacity)
}

// takeHeld returns what the process holds and a flush should send: the
// leased tokens always, and the credit unless holdCredit keeps it (or
// always, with all, for Close and for a Withdraw that asks Redis). While
// the credit is kept the pending deposits join it instead of being sent.
func (b *Budget) takeHeld(all bool) (leased, credit int64) {
	leased = min(b.leased.Swap(0), b.capacity)
	if !all {
		now := b.now().UnixNano()
		b.addCredit(now)
		var age time.Duration
		if since := b.creditSince.Load(); since != 0 {
			age = time.Duration(now - since)
		}
		if holdCredit(b.refusing(), b.lastTokens.Load() < tokenUnit, b.credit.Load(), age) {
			return leased, 0
		}
	}
	if b.credit.Load() != 0 {
		credit = b.credit.Swap(0)
	}
	b.creditSince.Store(0)
	return leased, min(credit, b.capacity)
}

// addCredit moves the pending deposits to the credit, noting when the
// credit started.
func (b *Budget) addCredit(now int64) {
	if add := b.takeDeposits(); add != 0 {
		b.credit.Add(add)
		b.creditSince.CompareAndSwap(0, now)
	}
}
