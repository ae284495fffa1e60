package pgidempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Sweep deletes up to limit records that have expired (responses past
// their TTL, reservations abandoned past AbandonedTTL) and returns how
// many it deleted. Call it periodically, from any number of instances. It
// is safe beside a running Reserve: a record a Reserve renews at the same
// moment is re-checked after its lock and kept, and records locked by a
// transaction still running are skipped.
func (s *Store) Sweep(ctx context.Context, limit int) (int64, error) {
	if limit <= 0 {
		return 0, errors.New("pgidempotency: Sweep needs a positive limit")
	}
	tag, err := s.pool.Exec(ctx, s.sql.sweep, pgx.QueryExecModeExec, int64(limit))
	if err != nil {
		return 0, fmt.Errorf("pgidempotency: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}
