package pgidempotency

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Schema returns the statements that create table (empty: the default)
// and its token sequence and expiry index, if they do not exist: run them
// once, in a migration of your own or with [Store.Migrate].
func Schema(table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	if !identifier.MatchString(table) {
		return "", fmt.Errorf("%w: %q", ErrInvalidTable, table)
	}
	return newStatements(table).schema, nil
}

// Migrate creates the store's table, sequence and index if they do not
// exist. Concurrent calls from several instances are safe.
func (s *Store) Migrate(ctx context.Context) error {
	// One transaction-scoped advisory lock: two instances creating the
	// same table at once would otherwise race on the catalog.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgidempotency: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", s.sql.table); err != nil {
		return fmt.Errorf("pgidempotency: migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, s.sql.schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("pgidempotency: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgidempotency: migrate: %w", err)
	}
	return nil
}
