package httpretry

import (
	"context"
	"math"
	"sync/atomic"
)

// Budget limits retries across the operations of one Transport, so that an
// outage does not multiply traffic: every operation deposits, every retry
// withdraws, and a retry that finds the budget empty is not sent.
//
// A Budget is shared by all the goroutines that use a Transport and must be
// safe for concurrent use. [TokenBucket] is the budget of one process;
// a budget kept in a shared store (see contrib/redisretry) bounds a whole
// fleet.
type Budget interface {
	// Deposit is called once per logical operation, before its first
	// attempt. It must not block.
	Deposit()
	// Withdraw is called once per retry, after every other check allowed
	// it and before its wait, and once per hedge, before it is sent. It
	// may consult a shared store; it must return by ctx's deadline, which
	// is the operation's. false stops the operation with
	// [BudgetExhausted], or, for a hedge, ends hedging for the operation.
	Withdraw(ctx context.Context) bool
	// Refund gives back a token withdrawn for a retry or a hedge that was
	// then never sent: the wait was cut short or left too little time, the
	// quota was spent when the wait ended, no body could be made for it,
	// the Throttle refused the hedge, or a hook panicked before it left.
	Refund()
}

// Unlimited is a [Budget] that admits every retry. Use it only where
// another layer bounds retry traffic: without a budget, a sustained outage
// turns each operation into MaxAttempts requests.
var Unlimited Budget = unlimited{}

type unlimited struct{}

func (unlimited) Deposit()                      {}
func (unlimited) Withdraw(context.Context) bool { return true }
func (unlimited) Refund()                       {}

// tokenUnit is one token in the fixed-point units a TokenBucket counts in.
// Counting millionths of a token in an integer keeps the arithmetic exact
// for the decimal rates budgets are written with: ten deposits of 0.1 make
// exactly one token, which ten float64 additions of 0.1 do not.
const tokenUnit = 1_000_000

// maxTokens is the largest capacity a TokenBucket can represent.
const maxTokens = 4_611_686_018_427 // math.MaxInt64 / tokenUnit / 2: room to add a deposit without overflow

// TokenBucket is a retry budget for one process: a bucket of tokens that
// starts full, gains perRequest tokens per operation and loses one per
// retry, so that with N deposits it admits at most capacity +
// floor(N·perRequest) retries. The zero value holds no tokens and admits
// no retry. It is safe for concurrent use and never blocks. A fleet of P
// processes with a bucket each admits up to P·capacity retries at once
// (see docs/fleet-budget.md).
type TokenBucket struct {
	tokens     atomic.Int64 // in tokenUnit; 0 <= tokens <= capacity
	capacity   int64        // in tokenUnit
	perRequest int64        // in tokenUnit
}

// NewTokenBucket returns a full TokenBucket of capacity tokens that gains
// perRequest tokens per Deposit, both rounded to a millionth of a token.
// A capacity that is not positive admits no retry; a negative or NaN
// perRequest never replenishes. NewTokenBucket(20, 0.1), the default,
// allows a burst of 20 retries, then about one per ten operations.
func NewTokenBucket(capacity, perRequest float64) *TokenBucket {
	b := &TokenBucket{capacity: toUnits(capacity)}
	b.perRequest = min(toUnits(perRequest), b.capacity)
	b.tokens.Store(b.capacity)
	return b
}

// toUnits converts a token count to fixed-point units, mapping NaN and
// non-positive values to 0 and clamping values too large to represent.
func toUnits(tokens float64) int64 {
	if math.IsNaN(tokens) {
		return 0
	}
	return int64(math.Round(min(max(tokens, 0), maxTokens) * tokenUnit))
}

// Deposit adds perRequest tokens, up to the bucket's capacity.
func (b *TokenBucket) Deposit() {
	if b.perRequest == 0 {
		return
	}
	for {
		old := b.tokens.Load()
		if old == b.capacity { // tokens never exceed capacity
			// A full bucket is the common case in healthy traffic: a plain
			// load keeps it free of contended writes.
			return
		}
		next := min(old+b.perRequest, b.capacity)
		if b.tokens.CompareAndSwap(old, next) {
			return
		}
	}
}

// Withdraw takes one token and reports true, or reports false and takes
// nothing when less than one whole token is left. It never blocks; ctx is
// not used.
func (b *TokenBucket) Withdraw(context.Context) bool {
	for {
		old := b.tokens.Load()
		if old < tokenUnit {
			return false
		}
		if b.tokens.CompareAndSwap(old, old-tokenUnit) {
			return true
		}
	}
}

// Refund returns a token withdrawn for a retry that was then not sent
// (its wait was cut short, or left too little time), up to capacity.
func (b *TokenBucket) Refund() {
	for {
		old := b.tokens.Load()
		next := min(old+tokenUnit, b.capacity)
		if b.tokens.CompareAndSwap(old, next) {
			return
		}
	}
}

// Tokens returns the number of tokens in the bucket now, for metrics and
// tests. Other goroutines may change it at any moment.
func (b *TokenBucket) Tokens() float64 {
	return float64(b.tokens.Load()) / tokenUnit
}
