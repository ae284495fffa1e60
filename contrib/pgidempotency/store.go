package pgidempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults for the zero values of Options' fields.
const (
	DefaultTable        = "idempotency_records"
	DefaultAbandonedTTL = 24 * time.Hour
	DefaultTimeout      = 10 * time.Second
)

// Options configures a [Store]. The zero value uses the table
// "idempotency_records", READ COMMITTED transactions and a 10 s bound on
// each of the store's statements.
type Options struct {
	// Table is the records' table, optionally schema-qualified
	// ("billing.idempotency_records"); its token sequence is the table's
	// name followed by "_tokens". Lowercase letters, digits and
	// underscores only. If empty, "idempotency_records".
	Table string

	// TxOptions are the options of the transactions BeginTx starts, for
	// the handlers a [idempotency.TxHandler] runs: its isolation level
	// (serializable, say). If zero, the server's default (READ COMMITTED
	// unless configured otherwise).
	TxOptions pgx.TxOptions

	// AbandonedTTL is how long a reservation whose lock expired is kept
	// for a retry to take over: its fingerprint still binds the key. After
	// it, the key is free, and Sweep deletes the record. 0 (or negative)
	// means 24 hours.
	AbandonedTTL time.Duration

	// Timeout bounds each statement the store runs (Reserve, Complete,
	// Release, CompleteTx, the commit). A commit cut by it has an unknown
	// outcome, as a lost acknowledgement has. 0 (or negative) means 10 s.
	Timeout time.Duration
}

// Store is an [idempotency.TxStore] on PostgreSQL: its records live in
// the service's own database, so that a handler's rows and its recorded
// response commit in one transaction. Create its table with [Schema] (or
// [Store.Migrate]) once.
//
// Every deadline is computed by the database's clock, never the
// process's: instances with skewed clocks agree on when a lock expires.
// Tokens come from a sequence, which outlives the records. The store
// holds no session state (no advisory locks, no named prepared
// statements, no temporary tables): it works through a pooler in
// transaction mode, such as PgBouncer's pool_mode=transaction.
//
// A Store is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	txOpts  pgx.TxOptions
	timeout time.Duration
	// abandoned is AbandonedTTL in microseconds, the unit of the
	// statements' intervals.
	abandoned int64
	sql       statements
}

var _ idempotency.TxStore[pgx.Tx] = (*Store)(nil)

// identifier is a table name this package accepts: no quoting needed.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,50}(\.[a-z_][a-z0-9_]{0,50})?$`)

// ErrTxEnded is what CompleteTx returns for a transaction that a
// statement run through it (COMMIT, ROLLBACK) already ended: its rows were
// committed or undone apart from the record, which it does not write.
var ErrTxEnded = errors.New("pgidempotency: the transaction was ended by a statement run through it")

// ErrInvalidTable is returned by [New] and [Schema] for a table name that
// is not lowercase letters, digits and underscores (with one optional
// schema qualifier).
var ErrInvalidTable = errors.New("pgidempotency: invalid table name")

// New returns a Store on pool. It does not create the table: see [Schema]
// and [Store.Migrate].
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgidempotency: New needs a pool")
	}
	table := opts.Table
	if table == "" {
		table = DefaultTable
	}
	if !identifier.MatchString(table) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidTable, table)
	}
	s := &Store{
		pool:      pool,
		txOpts:    opts.TxOptions,
		timeout:   opts.Timeout,
		abandoned: micros(opts.AbandonedTTL),
		sql:       newStatements(table),
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if opts.AbandonedTTL <= 0 {
		s.abandoned = micros(DefaultAbandonedTTL)
	}
	return s, nil
}

// micros returns d in whole microseconds, at least 1.
func micros(d time.Duration) int64 {
	return max(d.Microseconds(), 1)
}

// Reserve implements [idempotency.Store] with one statement: an INSERT …
// ON CONFLICT that takes a free, expired or abandoned key, or else reads
// the record that holds it.
func (s *Store) Reserve(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (idempotency.Reservation, error) {
	if lockTTL <= 0 {
		return idempotency.Reservation{}, errNonPositiveTTL
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// The statement finds no row in one race only: the record that held
	// the key changed after the statement's snapshot was taken (a
	// concurrent Reserve inserted it, or replaced an expired one). Its
	// next run sees it. On a database whose default isolation is
	// REPEATABLE READ or SERIALIZABLE, the same race fails the statement
	// with a serialization failure instead; it is run again too.
	for range maxRuns {
		res, found, err := s.reserveOnce(ctx, key, fingerprint, micros(lockTTL))
		if Retryable(err) {
			continue
		}
		if err != nil || found {
			return res, err
		}
	}
	return idempotency.Reservation{}, errReserveContended
}

// sqlState is err's SQLSTATE, or "" when err is no error of the server's.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// reserveLockWait is how long Reserve waits for a record locked by a
// running transaction (a CompleteTx not yet committed) before it answers
// that the key is in progress. A transaction about to commit ends well
// within it; one whose instance is paused or cut off may hold the lock
// until idle_in_transaction_session_timeout ends it, and the duplicates
// meanwhile must not hold the pool's connections waiting.
const reserveLockWait = 250 * time.Millisecond

// maxRuns bounds the runs of a statement the store runs again after a
// race it lost (see Reserve).
const maxRuns = 8

// execAgain runs a statement of its own transaction (autocommit) again
// after a serialization failure, which a database whose default isolation
// is above READ COMMITTED answers when the row changed under it: the next
// run sees the change.
func execAgain(ctx context.Context, db execer, sql string, args ...any) (pgconn.CommandTag, error) {
	for i := 1; ; i++ {
		tag, err := db.Exec(ctx, sql, args...)
		if !Retryable(err) || i == maxRuns {
			return tag, err
		}
	}
}

var (
	errNonPositiveTTL   = errors.New("pgidempotency: non-positive TTL")
	errReserveContended = errors.New("pgidempotency: reserve: the key's record changed on every try")
)

func (s *Store) reserveOnce(ctx context.Context, key, fingerprint string, lockMicros int64) (idempotency.Reservation, bool, error) {
	var (
		reserved, tookOver, completed bool
		token                         int64
		fp                            *string
		status                        *int32
		header, body                  []byte
	)
	err := s.pool.QueryRow(ctx, s.sql.reserve, pgx.QueryExecModeExec, recordKey(key), fingerprint, lockMicros, s.abandoned, reserveLockWait.Milliseconds()).
		Scan(&reserved, &token, &tookOver, &fp, &completed, &status, &header, &body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return idempotency.Reservation{}, false, nil
	case sqlState(err) == "55P03":
		// The record is locked by a transaction recording its response:
		// the key is in progress.
		return idempotency.Reservation{State: idempotency.StateInProgress}, true, nil
	case err != nil:
		return idempotency.Reservation{}, false, fmt.Errorf("pgidempotency: reserve: %w", err)
	}
	state, err := reservedState(reserved, completed, fp, fingerprint)
	if err != nil {
		return idempotency.Reservation{}, false, err
	}
	res := idempotency.Reservation{State: state}
	switch state {
	case idempotency.StateReserved:
		res.Token, res.TookOver = idempotency.Token(token), tookOver
	case idempotency.StateCompleted:
		res.Response, err = decodeResponse(status, header, body)
	}
	return res, true, err
}

// reservedState is what Reserve's row says: the key was reserved by this
// call, or is held by a record with fingerprint fp.
func reservedState(reserved, completed bool, fp *string, fingerprint string) (idempotency.State, error) {
	switch {
	case reserved:
		return idempotency.StateReserved, nil
	case fp == nil:
		return 0, errors.New("pgidempotency: reserve: a record without a fingerprint")
	case *fp != fingerprint:
		return idempotency.StateMismatch, nil
	case completed:
		return idempotency.StateCompleted, nil
	}
	return idempotency.StateInProgress, nil
}

// recordKey is what a record is found by: the SHA-256 of its key, of a
// fixed length whatever the key's, which an index entry always holds.
func recordKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// Complete implements [idempotency.Store]: it records resp in a statement
// of its own, committed at once.
func (s *Store) Complete(ctx context.Context, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	return s.complete(ctx, s.pool, key, token, resp, ttl)
}

// CompleteTx implements [idempotency.TxStore]: it records resp in tx, with
// one UPDATE that holds the key's record locked until tx ends. It returns
// [idempotency.ErrStaleToken] when token no longer owns the key, under
// every isolation level (under REPEATABLE READ and SERIALIZABLE, wrapping
// the serialization failure a takeover after tx's snapshot causes); tx
// must then roll back. It returns [ErrTxEnded], and records nothing, when tx
// is no longer open: a statement run through it (COMMIT, ROLLBACK) ended
// it.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	if tx == nil {
		return errors.New("pgidempotency: CompleteTx needs a transaction")
	}
	if c := tx.Conn(); c != nil && c.PgConn().TxStatus() == 'I' {
		// The connection is open and in no transaction: a statement of
		// the handler's (COMMIT, ROLLBACK) ended tx. The record would be
		// written on its own, apart from the rows it answers for.
		return ErrTxEnded
	}
	return s.complete(ctx, tx, key, token, resp, ttl)
}

// execer is what runs a statement: the pool, or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *Store) complete(ctx context.Context, db execer, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	if ttl <= 0 {
		return errNonPositiveTTL
	}
	if resp == nil {
		return errors.New("pgidempotency: Complete with a nil response")
	}
	header, err := encodeHeader(resp.Header)
	if err != nil {
		return err
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	run := db.Exec
	if _, inTx := db.(pgx.Tx); !inTx {
		// A statement of its own may run again; one in the caller's
		// transaction may not (the transaction is aborted).
		run = func(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
			return execAgain(ctx, db, sql, args...)
		}
	}
	tag, err := run(ctx, s.sql.complete, pgx.QueryExecModeExec, recordKey(key), int64(token), int32(resp.Status), header, body, micros(ttl))
	if err != nil && sqlState(err) == "40001" && s.lostOwnership(ctx, key, token) {
		// Under REPEATABLE READ or SERIALIZABLE, a takeover (or a release,
		// a sweep) committed after the transaction's snapshot fails the
		// UPDATE instead of leaving it no row: the token is stale all the
		// same.
		return fmt.Errorf("pgidempotency: complete: %w (%w)", idempotency.ErrStaleToken, err)
	}
	if err != nil {
		return fmt.Errorf("pgidempotency: complete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrStaleToken
	}
	return nil
}

// lostOwnership reports whether token no longer holds key's record, as
// a statement of its own (on the pool, outside any transaction) sees it
// now. An error counts as no: the caller keeps its own error.
func (s *Store) lostOwnership(ctx context.Context, key string, token idempotency.Token) bool {
	var owns bool
	err := s.pool.QueryRow(ctx, s.sql.owns, pgx.QueryExecModeExec, recordKey(key), int64(token)).Scan(&owns)
	return err == nil && !owns
}

// Release implements [idempotency.Store].
func (s *Store) Release(ctx context.Context, key string, token idempotency.Token) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tag, err := execAgain(ctx, s.pool, s.sql.release, pgx.QueryExecModeExec, recordKey(key), int64(token))
	if err != nil {
		return fmt.Errorf("pgidempotency: release: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrStaleToken
	}
	return nil
}
