package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// MetricsRecord is what a metrics request left behind for its retries.
type MetricsRecord struct {
	RequestSHA256 [sha256.Size]byte // digest of the canonical request
	Metrics       []byte            // the metrics object as first answered
}

// SaveMetrics records rec under the client's idempotencyKey unless a record
// is there already. It returns the record that holds (rec, or the earlier
// one) and whether rec was stored. Two concurrent calls with one key store
// exactly one record; the caller compares digests to tell a replay (same
// request) from a conflict (409).
func (s *Store) SaveMetrics(ctx context.Context, clientID, idempotencyKey string, rec MetricsRecord, now time.Time) (MetricsRecord, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// DO NOTHING, then a read of the holder: a replay writes no tuple (a
	// no-op DO UPDATE would). The INSERT waits for a concurrent one with the
	// same key to commit, so the SELECT then sees its row. Only pruning
	// between the two can hide it: the key is free again, and the next
	// attempt stores rec.
	for attempt := 0; ; attempt++ {
		tag, err := s.pool.Exec(ctx, `
			INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (client_id, idempotency_key) DO NOTHING`,
			clientID, idempotencyKey, rec.RequestSHA256[:], rec.Metrics, now)
		if err != nil {
			return MetricsRecord{}, false, err
		}
		if tag.RowsAffected() == 1 {
			return rec, true, nil
		}
		var (
			held   MetricsRecord
			digest []byte
		)
		err = pgx.BeginTxFunc(ctx, s.pool, readWrite, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `
				SELECT request_sha256, metrics, `+waitForStandbys+` FROM metrics_requests
				WHERE client_id = $1 AND idempotency_key = $2`,
				clientID, idempotencyKey).Scan(&digest, &held.Metrics, nil)
		})
		if errors.Is(err, pgx.ErrNoRows) && attempt < 2 {
			continue
		}
		if err != nil {
			return MetricsRecord{}, false, err
		}
		copy(held.RequestSHA256[:], digest)
		return held, false, nil
	}
}

// waitForStandbys, in the select list of a replay's read, makes the read's
// commit wait for the synchronous standbys as a write's does, and so until
// they have every commit the read saw. A replay answers with what an earlier
// request committed, and that commit may be on the primary alone: a writer
// whose bound ended while its COMMIT waited for the standbys is cancelled by
// pgx as it drops the connection, and PostgreSQL then keeps the commit,
// visible, without their confirmation. Acknowledged by a replay, a failover
// could lose it.
//
// The message goes to the WAL with a transaction ID, which is what makes a
// commit wait (an ID alone does not: PostgreSQL waits only for a commit that
// wrote WAL), and it takes no lock on the row, so a replay never waits for
// one. Without synchronous replication nothing waits. Any role may call it
// (PostgreSQL grants it to PUBLIC; a server that revokes it refuses every
// replay). TestReplaysWaitForStandbys shows the wait.
const waitForStandbys = `pg_logical_emit_message(true, 'evalmeter', 'replay')`

// readWrite: a transaction that emits waitForStandbys must be read-write,
// which a server in recovery refuses with 25006, unavailable (a connection
// to a primary just demoted); the message itself would fail there with an
// internal error, a 500.
var readWrite = pgx.TxOptions{AccessMode: pgx.ReadWrite}

// awaitStandbys returns once the synchronous standbys have every commit
// seen so far: see waitForStandbys.
func (s *Store) awaitStandbys(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, s.pool, readWrite, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT `+waitForStandbys)
		return err
	})
}
