package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"
)

// Claim is the reservation a keyed request runs under, as the handler a
// [Handler] or [TxHandler] runs finds it in its request's context
// ([ClaimFrom]): the key as the [Store] sees it (scoped) and the fencing
// token that owns it.
//
// A handler that owns its own transaction records its response itself:
// it writes its rows, calls its store's CompleteTx with Key and Token in
// that transaction, commits, calls [Claim.Recorded], and then writes the
// response it recorded. The Handler then neither records nor releases the
// key, and sends that response as recorded. If CompleteTx returns
// [ErrStaleToken] (the lock expired and another request took the key
// over), the transaction must roll back, and the handler answers without
// calling Recorded: the Handler then releases nothing it does not own
// (the release is fenced). If the commit's outcome is unknown (its
// acknowledgement was lost), the handler calls [Claim.OutcomeUnknown]:
// the key is then neither recorded nor released, and its lock expires.
type Claim struct {
	// Key is the key as the store sees it: the request's key, after its
	// scope and a NUL byte when [Options.KeyScope] gives one.
	Key string
	// Token is the fencing token of the reservation.
	Token Token

	recorded atomic.Bool
	unknown  atomic.Bool
}

// Recorded tells the [Handler] that the handler recorded its response in
// its own committed transaction. Call it only after the commit
// succeeded. A [TxHandler] records the response itself and ignores it.
func (c *Claim) Recorded() { c.recorded.Store(true) }

// OutcomeUnknown tells the [Handler] that the handler's own commit may or
// may not have happened (its acknowledgement was lost): the Handler then
// neither records the response nor releases the key, whose lock expires
// after [Options.LockTTL]; a retry then gets the record if the commit
// happened, or runs the handler again if not. The handler should answer
// 503 with Retry-After. A [TxHandler] ignores it: it commits itself.
func (c *Claim) OutcomeUnknown() { c.unknown.Store(true) }

// ClaimFrom returns the reservation of the keyed request whose context is
// ctx, when a [Handler] or [TxHandler] runs it as the owner of its key;
// ok is false for a request without a key, or not run by one.
func ClaimFrom(ctx context.Context) (c *Claim, ok bool) {
	run, ok := ctx.Value(executingKey{}).(executing)
	if !ok || run.claim == nil {
		return nil, false
	}
	return run.claim, true
}

// DerivedKey returns the Idempotency-Key for an outbound call, named
// step, that the keyed request whose context is ctx makes: a charge sent
// to a payment provider, say. It is the same on every run of that request
// (a retry after a crash, a takeover after an expired lock), and differs
// between steps, keys and scopes, so that the provider deduplicates each
// call across every run. It is 64 hexadecimal digits: a SHA-256 of the
// key as the store sees it and the step, which tells the provider neither.
// ok is false when ctx is not that of a keyed request run by a [Handler]
// or [TxHandler]: there is no key to derive from, and the caller must not
// send a call that cannot be deduplicated as if it could.
func DerivedKey(ctx context.Context, step string) (key string, ok bool) {
	c, ok := ClaimFrom(ctx)
	if !ok {
		return "", false
	}
	sum := sha256.New()
	// Each field is length-prefixed: a key and a step cannot run into
	// one another, whatever bytes they hold.
	writeField(sum, "httpretry/idempotency derived key")
	writeField(sum, c.Key)
	writeField(sum, step)
	return hex.EncodeToString(sum.Sum(nil)), true
}

// writeField writes s to a hash with its length first, so that the
// fields of one hash cannot run into one another.
func writeField(h interface{ Write([]byte) (int, error) }, s string) {
	var n [8]byte
	for i := range n {
		n[i] = byte(uint64(len(s)) >> (8 * i))
	}
	h.Write(n[:])
	h.Write([]byte(s))
}
