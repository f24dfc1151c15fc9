package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// MetricsRecord is what a metrics request left behind for its retries.
type MetricsRecord struct {
	RequestSHA256 [sha256.Size]byte // digest of the canonical request
	Metrics       []byte            // the metrics object as first answered
}

// SaveMetrics records rec under the session's client and idempotencyKey
// unless a record is there already. It returns the record under the key
// (rec, or the earlier one) and whether rec was stored. Two concurrent
// calls with one key store exactly one record; the caller compares digests
// to tell a replay (same request) from a conflict (409).
//
// The session must still be live: ErrSessionEnded when it has ended (its
// key revoked), read by the statement that writes, so that a caller that
// authenticated the session earlier (or from a cache) cannot miss a
// revocation that committed since.
func (s *Store) SaveMetrics(ctx context.Context, sess Session, idempotencyKey string, rec MetricsRecord, now time.Time) (MetricsRecord, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// The write waits for a concurrent one with the same key to commit, so
	// the read of the recorded one then sees its row. Only pruning between the two
	// can hide it: the key is free again, and the next attempt stores rec.
	for attempt := 0; ; attempt++ {
		w := &metricsWrite{ctx: ctx, sess: sess, idempotencyKey: idempotencyKey, rec: rec, now: now}
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
			recorded MetricsRecord
			digest   []byte
		)
		err = s.pool.QueryRow(ctx, `
			SELECT request_sha256, metrics FROM metrics_requests
			WHERE client_id = $1 AND idempotency_key = $2`,
			sess.ClientID, idempotencyKey).Scan(&digest, &recorded.Metrics)
		if errors.Is(err, pgx.ErrNoRows) && attempt < 2 {
			continue
		}
		if err == nil {
			err = s.awaitStandbys(ctx) // the record is another request's
		}
		if err != nil {
			return MetricsRecord{}, false, err
		}
		copy(recorded.RequestSHA256[:], digest)
		return recorded, false, nil
	}
}

// metricsWriter writes the metrics records of concurrent requests together:
// one statement, and so one commit, for the records that wait while an
// earlier statement runs. A commit costs PostgreSQL far more than a row,
// and its flush to disk is the same for one row or fifty.
//
// The first caller to find fewer than maxRunning statements under way runs
// the next one itself, with every write then queued (its own among them);
// a statement that leaves writes queued behind it hands them to a new
// goroutine. A caller whose context ends stops waiting, and its write,
// unless a statement took it already, is dropped.
type metricsWriter struct {
	store *Store

	mu      sync.Mutex
	queue   []*metricsWrite
	running int
}

const (
	// maxMetricsRunning is how many statements run at once. One would
	// serialize them on a round trip; a few keep the rows per commit high.
	maxMetricsRunning = 2
	// maxMetricsBatch bounds the rows of one statement.
	maxMetricsBatch = 64
)

// metricsWrite is one record to store, and then what the statement found.
type metricsWrite struct {
	ctx            context.Context
	sess           Session
	idempotencyKey string
	rec            MetricsRecord
	now            time.Time

	live, stored bool
	err          error
	done         chan struct{}
}

// write stores w, with the records queued beside it, and waits for the
// outcome (w.live, w.stored, w.err), or for ctx.
func (m *metricsWriter) write(w *metricsWrite) error {
	w.done = make(chan struct{})
	m.mu.Lock()
	m.queue = append(m.queue, w)
	lead := m.running < maxMetricsRunning
	if lead {
		m.running++
	}
	m.mu.Unlock()
	if lead {
		m.run()
	}
	select {
	case <-w.done:
		return w.err
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// run writes one batch, then hands what is queued behind it to a new
// goroutine, so that no caller waits for others' batches.
func (m *metricsWriter) run() {
	m.mu.Lock()
	batch := m.take()
	m.mu.Unlock()
	m.store.writeMetrics(batch)
	for _, w := range batch {
		close(w.done)
	}
	m.mu.Lock()
	if len(m.queue) > 0 {
		go m.run()
	} else {
		m.running--
	}
	m.mu.Unlock()
}

// take removes the next batch from the queue: at most maxMetricsBatch
// writes still awaited, no two of one client and key (one statement would
// take the second for the first's replay). Dropped writes are closed here.
func (m *metricsWriter) take() []*metricsWrite {
	var batch []*metricsWrite
	rest := m.queue[:0]
	for i, w := range m.queue {
		switch {
		case w.ctx.Err() != nil:
			w.err = w.ctx.Err()
			close(w.done)
		case len(batch) == maxMetricsBatch || hasClientKey(batch, w):
			rest = append(rest, w)
		default:
			batch = append(batch, w)
		}
		m.queue[i] = nil
	}
	m.queue = rest
	return batch
}

// hasClientKey reports whether batch writes under w's client and
// idempotency key.
func hasClientKey(batch []*metricsWrite, w *metricsWrite) bool {
	for _, b := range batch {
		if b.idempotencyKey == w.idempotencyKey && b.sess.ClientID == w.sess.ClientID {
			return true
		}
	}
	return false
}

// writeMetrics stores each record of batch whose session is still live,
// unless its client has a record under its key already, in one
// statement, and sets each write's outcome.
func (s *Store) writeMetrics(batch []*metricsWrite) {
	if len(batch) == 0 {
		return
	}
	n := len(batch)
	// Bounded by the store alone: no caller's cancellation ends it.
	ctx, span := startBatch(s, "ledger.metrics_batch", batch, func(w *metricsWrite) context.Context { return w.ctx })
	defer span.End()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var (
		clients  = make([]string, n)
		keys     = make([]string, n)
		digests  = make([][]byte, n)
		metrics  = make([][]byte, n)
		times    = make([]time.Time, n)
		sessions = make([]string, n)
	)
	for i, w := range batch {
		clients[i], keys[i], digests[i], metrics[i], times[i], sessions[i] =
			w.sess.ClientID, w.idempotencyKey, w.rec.RequestSHA256[:], w.rec.Metrics, w.now, w.sess.ID
	}
	// DO NOTHING, then a read of the recorded one by the caller: a replay writes
	// no tuple (a no-op DO UPDATE would). Rows go in in key order: two
	// statements inserting the same keys in another order each lock a key
	// the other waits for, and PostgreSQL ends one as a deadlock.
	rows, err := s.pool.Query(ctx, `
		WITH input AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bytea[], $5::timestamptz[], $6::text[])
				WITH ORDINALITY AS t(client_id, idempotency_key, request_sha256, metrics, created_at, session_id, i)
		), live AS (
			SELECT input.* FROM input
			JOIN sessions s ON s.id = input.session_id AND s.client_id = input.client_id AND s.ended_at IS NULL
			LEFT JOIN api_keys k ON k.key_sha256 = s.key_sha256
			WHERE k.revoked_at IS NULL OR coalesce(k.usable_until, '-infinity') > input.created_at
		), saved AS (
			INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
			SELECT client_id, idempotency_key, request_sha256, metrics, created_at FROM live
			ORDER BY client_id, idempotency_key
			ON CONFLICT (client_id, idempotency_key) DO NOTHING
			RETURNING client_id, idempotency_key
		)
		SELECT input.i, live.i IS NOT NULL, saved.client_id IS NOT NULL
		FROM input
		LEFT JOIN live USING (i)
		LEFT JOIN saved ON saved.client_id = input.client_id AND saved.idempotency_key = input.idempotency_key`,
		clients, keys, digests, metrics, times, sessions)
	if err == nil {
		for rows.Next() {
			var (
				i            int
				live, stored bool
			)
			if err = rows.Scan(&i, &live, &stored); err != nil {
				break
			}
			batch[i-1].live, batch[i-1].stored = live, stored
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		for _, w := range batch {
			w.live, w.stored, w.err = false, false, err
		}
	}
}
