package ledger_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
)

// TestPruneBacklog: a backlog of expired records far larger than one
// statement can delete within its 2 s timeout is cleared, in batches, and
// records younger than the cutoff stay.
func TestPruneBacklog(t *testing.T) {
	_, url := open(t)
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: 2 * time.Second})
	must(t, err)
	defer s.Close()
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 1, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	const backlog = 400_000
	_, err = pgtest.Exec(t, url, `
		INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
		SELECT 'acme', 'expired-key-' || i, sha256(i::text::bytea), convert_to(repeat('{"metrics":1}', 20), 'UTF8'),
		       '2026-11-19T09:00:00Z'::timestamptz + i * interval '1 ms'
		FROM generate_series(1, 400000) AS i`)
	must(t, err)
	_, err = pgtest.Exec(t, url, `
		INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
		SELECT 'acme', 'fresh-key-' || i, sha256(i::text::bytea), '{}', '2026-11-21T08:30:00Z'
		FROM generate_series(1, 10) AS i`)
	must(t, err)
	must(t, vacuumAnalyze(t, url))

	n, busy, err := s.PruneMetrics(ctx, t0.Add(-time.Hour), ledger.PruneBatch)
	if err != nil || busy || n != backlog {
		t.Fatalf("pruned %d, busy %v, %v; want %d", n, busy, err, backlog)
	}
	if left := query[int](t, url, `SELECT count(*)::int FROM metrics_requests`); left[0] != 10 {
		t.Errorf("%d records left, want the 10 younger than the cutoff", left[0])
	}
}

// TestPruneOneAtATime: while another process prunes (holds the advisory
// lock), PruneMetrics deletes nothing and says so.
func TestPruneOneAtATime(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 1, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	_, err := pgtest.Exec(t, url, `
		INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
		SELECT 'acme', 'expired-key-' || i, sha256(i::text::bytea), '{}', '2026-11-19T09:00:00Z'
		FROM generate_series(1, 10) AS i`)
	must(t, err)

	other, err := pgx.Connect(ctx, url)
	must(t, err)
	defer other.Close(ctx)
	lock := ledger.PruneLockKey
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	n, busy, err := s.PruneMetrics(ctx, t0, 3)
	if err != nil || !busy || n != 0 {
		t.Errorf("with another pruner: pruned %d, busy %v, %v; want 0 and busy", n, busy, err)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	n, busy, err = s.PruneMetrics(ctx, t0, 3)
	if err != nil || busy || n != 10 {
		t.Errorf("alone: pruned %d, busy %v, %v; want 10 in batches of 3", n, busy, err)
	}
	// The lock went back: a second sweep is not busy.
	if _, busy, err := s.PruneMetrics(ctx, t0, 3); busy || err != nil {
		t.Errorf("a second sweep: busy %v, %v", busy, err)
	}
}

func vacuumAnalyze(t *testing.T, url string) error {
	_, err := pgtest.Exec(t, url, `VACUUM ANALYZE metrics_requests`)
	return err
}
