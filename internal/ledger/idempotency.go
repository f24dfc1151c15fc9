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

// SaveMetrics records rec under the session's client and idempotencyKey
// unless a record is there already. It returns the record that holds (rec,
// or the earlier one) and whether rec was stored. Two concurrent calls with
// one key store exactly one record; the caller compares digests to tell a
// replay (same request) from a conflict (409).
//
// The session must still be live: ErrSessionEnded when it has ended (its
// key revoked), read by the statement that writes, so that a caller that
// authenticated the session earlier (or from a cache) cannot miss a
// revocation that committed since.
func (s *Store) SaveMetrics(ctx context.Context, sess Session, idempotencyKey string, rec MetricsRecord, now time.Time) (MetricsRecord, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// The write waits for a concurrent one with the same key to commit, so
	// the read of the holder then sees its row. Only pruning between the two
	// can hide it: the key is free again, and the next attempt stores rec.
	for attempt := 0; ; attempt++ {
		w := &metricsWrite{ctx: ctx, sess: sess, key: idempotencyKey, rec: rec, now: now}
		err := s.metrics.write(w)
		switch {
		case err != nil:
			return MetricsRecord{}, false, err
		case !w.live:
			return MetricsRecord{}, false, ErrSessionEnded
		case w.stored:
			return rec, true, nil
		}
		var (
			held   MetricsRecord
			digest []byte
		)
		err = s.pool.QueryRow(ctx, `
			SELECT request_sha256, metrics FROM metrics_requests
			WHERE client_id = $1 AND idempotency_key = $2`,
			sess.ClientID, idempotencyKey).Scan(&digest, &held.Metrics)
		if errors.Is(err, pgx.ErrNoRows) && attempt < 2 {
			continue
		}
		if err == nil {
			err = s.awaitStandbys(ctx) // the record is another request's
		}
		if err != nil {
			return MetricsRecord{}, false, err
		}
		copy(held.RequestSHA256[:], digest)
		return held, false, nil
	}
}

// awaitStandbys returns once the synchronous standbys have every commit
// seen so far. A replay answers with what an earlier request committed, and
// a refusal from what others spent; those commits may be on the primary
// alone: a writer whose bound ended while its COMMIT waited for the standbys
// is cancelled by pgx as it drops the connection, and PostgreSQL then keeps
// the commit, visible, without their confirmation. Acknowledged, a failover
// could lose it.
//
// The transactional message goes to the WAL with a transaction ID, which is
// what makes a commit wait (an ID alone does not: PostgreSQL waits only for
// a commit that wrote WAL), and since the WAL is ordered, the wait covers
// every earlier commit. It takes no lock. Without synchronous replication
// nothing waits. Any role may call it (PostgreSQL grants it to PUBLIC; a
// server that revokes it refuses every replay). The transaction is
// read-write, which a server in recovery (a primary just demoted) refuses
// with 25006, unavailable; the message itself would fail there with an
// internal error. TestReplaysWaitForStandbys shows the wait.
func (s *Store) awaitStandbys(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'evalmeter', 'replay')`)
		return err
	})
}
