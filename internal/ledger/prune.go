package ledger

import (
	"context"
	"fmt"
	"time"
)

// PruneBatch is how many metrics records one pruning statement deletes:
// small enough to finish well within the statement timeout.
const PruneBatch = 5000

// PruneLockKey is the advisory lock that lets one process prune at a time.
const PruneLockKey int64 = 0x65766d5f7072756e // "evm_prun"

// PruneMetrics deletes the metrics records created before cutoff, in
// batches of at most batch rows, each a statement of its own under the
// statement timeout, until none is left or ctx ends. It runs only while it
// holds an advisory lock: when another process is pruning, it returns at
// once with busy true.
func (s *Store) PruneMetrics(ctx context.Context, cutoff time.Time, batch int) (deleted int64, busy bool, err error) {
	if batch <= 0 {
		return 0, false, fmt.Errorf("%w prune batch %d: must be positive", ErrInvalid, batch)
	}
	actx, cancel := s.bound(ctx)
	conn, err := s.pool.Acquire(actx)
	cancel()
	if err != nil {
		return 0, false, err
	}
	defer conn.Release()
	// The lock belongs to the connection: should unlocking fail, the
	// connection is closed rather than returned to the pool still holding it.
	var locked bool
	lctx, cancel := s.bound(ctx)
	err = conn.QueryRow(lctx, `SELECT pg_try_advisory_lock($1)`, PruneLockKey).Scan(&locked)
	cancel()
	if err != nil || !locked {
		return 0, err == nil, err
	}
	defer func() {
		uctx, cancel := s.bound(context.WithoutCancel(ctx))
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, PruneLockKey); uerr != nil {
			conn.Conn().Close(uctx)
		}
	}()

	for ctx.Err() == nil {
		bctx, cancel := s.bound(ctx)
		tag, err := conn.Exec(bctx, `
			DELETE FROM metrics_requests WHERE (client_id, idempotency_key) IN (
				SELECT client_id, idempotency_key FROM metrics_requests
				WHERE created_at < $1 ORDER BY created_at LIMIT $2)`, cutoff, batch)
		cancel()
		if err != nil {
			return deleted, false, err
		}
		deleted += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return deleted, false, nil
		}
	}
	return deleted, false, ctx.Err()
}
