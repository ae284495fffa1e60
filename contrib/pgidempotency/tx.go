package pgidempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTxOwnedByHandler is what Commit and Rollback return on the
// transaction a [idempotency.TxHandler] gives its handler: the handler
// writes through it, and the TxHandler records the response in it and
// commits it.
var ErrTxOwnedByHandler = errors.New("pgidempotency: the transaction is the TxHandler's to commit or roll back")

// handlerTx is the transaction a TxHandler's handler sees: every pgx.Tx
// method but Commit and Rollback, which the TxHandler alone calls (a
// handler that committed its rows before the response was recorded
// would leave a crash between the two uncovered).
type handlerTx struct {
	pgx.Tx
}

func (t handlerTx) Commit(context.Context) error   { return ErrTxOwnedByHandler }
func (t handlerTx) Rollback(context.Context) error { return ErrTxOwnedByHandler }

// BeginTx implements [idempotency.TxStore]: a transaction on the pool
// with Options.TxOptions, for a TxHandler's handler.
func (s *Store) BeginTx(ctx context.Context) (pgx.Tx, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, s.txOpts)
	if err != nil {
		return nil, fmt.Errorf("pgidempotency: begin: %w", err)
	}
	return handlerTx{tx}, nil
}

// CommitTx implements [idempotency.TxStore]. Its error wraps
// [idempotency.ErrNotCommitted] when the server answered that the
// transaction did not commit, or the COMMIT was never sent; any other
// error (the connection lost after COMMIT was sent, the Timeout) leaves
// the outcome unknown.
func (s *Store) CommitTx(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return commitError(unwrapTx(tx).Commit(ctx))
}

// RollbackTx implements [idempotency.TxStore]; a transaction already
// ended is no error.
func (s *Store) RollbackTx(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := unwrapTx(tx).Rollback(ctx)
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgidempotency: rollback: %w", err)
	}
	return nil
}

func unwrapTx(tx pgx.Tx) pgx.Tx {
	if h, ok := tx.(handlerTx); ok {
		return h.Tx
	}
	return tx
}

// commitError classifies the error of a COMMIT: nil stays nil; an answer
// from the server (an error, or a COMMIT that rolled back an aborted
// transaction) and a COMMIT never sent certainly did not commit.
func commitError(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrTxCommitRollback) || errors.Is(err, pgx.ErrTxClosed) || errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("pgidempotency: commit: %w: %w", idempotency.ErrNotCommitted, err)
	}
	return fmt.Errorf("pgidempotency: commit: outcome unknown: %w", err)
}

// Retryable reports whether err is a transaction's conflict with another
// that a new run of it may not meet: a serialization failure (SQLSTATE
// 40001) or a deadlock (40P01). A handler that meets one answers a status
// its TxHandler releases (503 with Retry-After, say): the transaction
// rolls back, and the client's retry runs the handler again.
func Retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
