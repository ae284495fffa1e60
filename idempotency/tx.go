package idempotency

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrNotCommitted is what a [TxStore]'s CommitTx wraps when the database
// answered that the transaction did not commit (a serialization failure,
// a deferred constraint, a transaction already aborted): nothing of it
// was applied, and the key may be released. Any other error from
// CommitTx leaves the outcome unknown (the acknowledgement was lost with
// the connection): the transaction may have committed.
var ErrNotCommitted = errors.New("idempotency: transaction not committed")

// TxStore is a [Store] whose records live in the same database as the
// service's own data, so that a handler's writes and its recorded
// response commit in one transaction: a crash at any point leaves both
// or neither. Tx is the database's transaction type (pgx.Tx for
// contrib/pgidempotency); this package never looks inside it.
//
// CompleteTx is Complete inside tx: it records resp under key if token
// still owns the key's reservation, and returns [ErrStaleToken] otherwise
// (the lock expired and another request took the key over, or the record
// was released or expired): the caller must then roll tx back, and with
// it the handler's writes. A record written by CompleteTx becomes
// visible, and replayed, only when tx commits.
//
// BeginTx, CommitTx and RollbackTx start and end the transactions a
// [TxHandler] runs handlers in. CommitTx wraps [ErrNotCommitted] when the
// transaction certainly did not commit; RollbackTx of a transaction
// already ended is no error.
type TxStore[Tx any] interface {
	Store
	BeginTx(ctx context.Context) (Tx, error)
	CompleteTx(ctx context.Context, tx Tx, key string, token Token, resp *Response, ttl time.Duration) error
	CommitTx(ctx context.Context, tx Tx) error
	RollbackTx(ctx context.Context, tx Tx) error
}

// txKey is the context key of a TxHandler's transaction.
type txKey struct{}

// TxFrom returns the transaction a [TxHandler] runs the request whose
// context is ctx in; ok is false when there is none (a request without a
// key, or not run by a TxHandler). Tx must be the TxHandler's type.
func TxFrom[Tx any](ctx context.Context) (tx Tx, ok bool) {
	tx, ok = ctx.Value(txKey{}).(Tx)
	return tx, ok
}

// TxHandler is [Handler] for a [TxStore]: each keyed request that
// reserves its key runs next inside a transaction that also records its
// response, and nothing reaches the client before that transaction
// commits. For such a request, in this order:
//
//  1. Reserve the key (its own statement, committed at once), as Handler
//     does: duplicates are answered 409, replays and mismatches as by
//     Handler.
//  2. BeginTx. next runs with the transaction in its context ([TxFrom])
//     and must write its rows through it; its response is held in
//     memory, whole (a flush sends nothing; a hijack is refused).
//  3. CompleteTx records the response in the transaction, then CommitTx.
//  4. Only then the response goes to the client.
//
// What a failure at each step leaves:
//
//   - next answers a status [Options.Release] selects (5xx, 408, 429,
//     499), returns without answering after its client left, panics, or
//     writes a body over [Options.MaxResponseBody]: the transaction rolls
//     back, the key is released, and a retry runs next again. The 5xx
//     itself is sent marked "Idempotent-Recorded: false"; a body too
//     large to hold is answered 500, and a panic continues. A final error
//     (a 4xx next chose to answer) is recorded and committed like any
//     other response.
//   - CompleteTx finds the token stale (the lock expired and another
//     request took over): rollback, and 409 with Retry-After, whose retry
//     gets the new owner's response.
//   - BeginTx, CompleteTx or CommitTx fails in a way that certainly did
//     not commit ([ErrNotCommitted]): rollback, release, 503 with
//     Retry-After.
//   - CommitTx fails otherwise (the acknowledgement was lost): whether
//     the transaction committed is unknown, so the key is never
//     released: the request is answered 503 with Retry-After, and the
//     lock expires after [Options.LockTTL]. A retry then gets the
//     recorded response if the transaction committed, or runs next again
//     (taking the key over) if it did not; never both, never neither.
//   - The process dies before the commit: the database rolls the
//     transaction back and the lock expires; after the commit: the record
//     is there, and a retry replays it.
//
// Whenever the TxHandler answers in place of next's held response (a
// 409, a 503, a 500), it sends none of the headers next set for it.
//
// Writes next makes outside the transaction (through the pool, to
// another service) are not part of this: they happen again when next
// runs again. Give outbound calls a [DerivedKey] so that their servers
// deduplicate them.
//
// Options are Handler's, and mean the same. [Options.OnEvent] is called,
// for a request that reserved its key: with KindTakeover if it took the
// key over; then KindExecuted once, when next returns or panics (not when
// BeginTx failed: next never ran); then, when the key is released,
// KindNotRecorded (or KindFenced, or KindStoreError, for a Release that
// failed); then KindFenced for a stale CompleteTx, or KindStoreError
// when BeginTx, CompleteTx or CommitTx failed. A committed response adds
// nothing after KindExecuted. The returned handler is safe for concurrent
// use; it panics if next or store is nil.
func TxHandler[Tx any](next http.Handler, store TxStore[Tx], opts Options) http.Handler {
	if store == nil {
		panic("idempotency: TxHandler needs a non-nil handler and TxStore")
	}
	h := Handler(next, store, opts).(*handler)
	h.tx = &txRun[Tx]{store: store}
	return h
}

// txExecutor runs a reserved request in a transaction (TxHandler).
type txExecutor interface {
	execute(h *handler, w http.ResponseWriter, r *http.Request, body []byte, key string, res Reservation)
}

// txRun is a TxHandler's txExecutor for a store's transaction type.
type txRun[Tx any] struct {
	store TxStore[Tx]
}

// execute runs next in a transaction as the owner of key, then records
// its response, commits, and only then sends it — or rolls back.
func (x *txRun[Tx]) execute(h *handler, w http.ResponseWriter, r *http.Request, body []byte, key string, res Reservation) {
	if res.TookOver {
		h.event(r, KindTakeover, 0)
	}
	// The outcome is settled even when the client has gone: a retry
	// must find it.
	ctx := context.WithoutCancel(r.Context())
	tx, err := x.store.BeginTx(ctx)
	if err != nil {
		h.releaseKey(ctx, r, key, res.Token, 0)
		h.answer(w, r, KindStoreError, h.storeUnavailable())
		return
	}
	rec := &recorder{w: w, limit: h.maxResponseBody, release: h.release, outer: w.Header().Clone(), hold: true}
	finished := false
	defer func() {
		if !finished {
			// next panicked: nothing it wrote may stay.
			_ = x.store.RollbackTx(ctx, tx)
			h.event(r, KindExecuted, 0)
			h.releaseKey(ctx, r, key, res.Token, 0)
		}
	}()
	run := executing{store: h.store, key: key, claim: &Claim{Key: key, Token: res.Token}}
	inner := withBody(r, body, run)
	h.next.ServeHTTP(rec, inner.WithContext(context.WithValue(inner.Context(), txKey{}, tx)))
	finished = true
	abandoned := r.Context().Err() != nil
	if !abandoned {
		rec.implicitStatus()
	}
	h.event(r, KindExecuted, rec.status)
	x.settle(ctx, h, w, r, rec, rec.result(abandoned), tx, key, res.Token)
}

// settle records resp in tx and commits, or rolls back, and answers the
// client accordingly (see TxHandler).
func (x *txRun[Tx]) settle(ctx context.Context, h *handler, w http.ResponseWriter, r *http.Request, rec *recorder, resp *Response, tx Tx, key string, token Token) {
	if resp == nil {
		_ = x.store.RollbackTx(ctx, tx)
		h.releaseKey(ctx, r, key, token, rec.status)
		if rec.tooLarge {
			rec.discardHeader()
			h.writeProblem(w, h.responseNotHeld())
			return
		}
		rec.finish(false)
		return
	}
	err := x.store.CompleteTx(ctx, tx, key, token, resp, h.responseTTL)
	if err == nil {
		err = x.store.CommitTx(ctx, tx)
		if err == nil {
			rec.finish(true)
			return
		}
	} else {
		_ = x.store.RollbackTx(ctx, tx)
		err = notCommitted(err)
	}
	// The held response is not sent: neither are the headers next set
	// for it.
	rec.discardHeader()
	switch {
	case errors.Is(err, ErrStaleToken):
		h.event(r, KindFenced, rec.status)
		h.writeProblem(w, h.outstanding())
	case errors.Is(err, ErrNotCommitted):
		h.releaseKey(ctx, r, key, token, rec.status)
		h.answer(w, r, KindStoreError, h.storeUnavailable())
	default:
		// The commit's outcome is unknown: releasing the key now would
		// let a retry run next again after a commit. The lock expires in
		// its own time.
		h.answer(w, r, KindStoreError, h.storeUnavailable())
	}
}

// notCommitted marks an error of CompleteTx, after which the transaction
// was rolled back and certainly did not commit, as such.
func notCommitted(err error) error {
	if errors.Is(err, ErrStaleToken) || errors.Is(err, ErrNotCommitted) {
		return err
	}
	return errors.Join(ErrNotCommitted, err)
}

// responseNotHeld is a TxHandler's answer when next's response was too
// large to hold until the commit: its transaction was rolled back.
func (h *handler) responseNotHeld() problem {
	return problem{Status: http.StatusInternalServerError, Title: "Response too large to record",
		Detail: "The response was larger than this operation can record, and nothing was done. Retrying does not help."}
}
