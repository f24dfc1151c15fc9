package ledger

import (
	"context"
	"crypto/sha256"
	"time"
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
	var (
		held     MetricsRecord
		digest   []byte
		inserted bool
	)
	// The no-op update makes RETURNING give the row that holds either way;
	// xmax = 0 tells a fresh insert.
	err := s.pool.QueryRow(ctx, `
		INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (client_id, idempotency_key) DO UPDATE SET client_id = EXCLUDED.client_id
		RETURNING request_sha256, metrics, xmax = 0`,
		clientID, idempotencyKey, rec.RequestSHA256[:], rec.Metrics, now).
		Scan(&digest, &held.Metrics, &inserted)
	if err != nil {
		return MetricsRecord{}, false, err
	}
	copy(held.RequestSHA256[:], digest)
	return held, inserted, nil
}

// PruneMetrics deletes the records created before cutoff.
func (s *Store) PruneMetrics(ctx context.Context, cutoff time.Time) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM metrics_requests WHERE created_at < $1`, cutoff)
	return tag.RowsAffected(), err
}
