package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/poll"
)

// TestSaveMetricsBatched: writes that wait while the writer's statements
// run go together, at most one of a key in a statement, and each gets its
// own outcome: stored, the holder's record, or ErrSessionEnded.
func TestSaveMetricsBatched(t *testing.T) {
	ctx := t.Context()
	var statements atomic.Int32
	s, url := batchStore(t, ledger.Options{Timeout: 20 * time.Second, Tracer: countStatements{"unnest", &statements}})
	now := time.Now()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 3, Source: "test"}, now); err != nil {
		t.Fatal(err)
	}
	sessions := []ledger.Session{
		openSession(t, s, "acme", "sess_000000000000000000000001", now),
		openSession(t, s, "acme", "sess_000000000000000000000002", now),
		openSession(t, s, "acme", "sess_000000000000000000000003", now),
	}
	if _, err := pgtest.Exec(t, url, `UPDATE sessions SET ended_at = now() WHERE id = '`+sessions[2].ID+`'`); err != nil {
		t.Fatal(err)
	}

	// Both statements the writer runs at once wait on keys that an open
	// transaction holds, so that every later write queues.
	tx := holdInTx(t, url, `INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
		SELECT 'acme', k, sha256(k::bytea), '{}', now() FROM unnest(ARRAY['held-key-00001', 'held-key-00002']) k`)
	var wg sync.WaitGroup
	for _, key := range []string{"held-key-00001", "held-key-00002"} {
		wg.Go(func() {
			if _, stored, err := s.SaveMetrics(ctx, sessions[0], key, record(key), now); err != nil || !stored {
				t.Errorf("save %s after its holder rolled back: stored %v, %v", key, stored, err)
			}
		})
	}
	waitForLocks(t, url, "%unnest%", 2)

	const calls, keys = 45, 10
	type outcome struct {
		held   ledger.MetricsRecord
		stored bool
		err    error
	}
	out := make([]outcome, calls)
	for i := range calls {
		wg.Go(func() {
			o := &out[i]
			o.held, o.stored, o.err = s.SaveMetrics(ctx, sessions[i%3], fmt.Sprintf("batch-key-%05d", i%keys), record(fmt.Sprint(i%keys)), now)
		})
	}
	poll.Until(t, 20*time.Second, "every write queued", func() error {
		if n := ledger.QueuedMetrics(s); n != calls {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	storedPerKey := make([]int, keys)
	for i, o := range out {
		switch {
		case i%3 == 2:
			if !errors.Is(o.err, ledger.ErrSessionEnded) {
				t.Errorf("write %d, in the ended session: stored %v, %v; want ErrSessionEnded", i, o.stored, o.err)
			}
		case o.err != nil:
			t.Errorf("write %d: %v", i, o.err)
		case o.held.RequestSHA256 != record(fmt.Sprint(i%keys)).RequestSHA256:
			t.Errorf("write %d got the record %s", i, o.held.Metrics)
		case o.stored:
			storedPerKey[i%keys]++
		}
	}
	for k, n := range storedPerKey {
		if n != 1 {
			t.Errorf("key %d stored %d times, want once", k, n)
		}
	}
	if n := query[int64](t, url, `SELECT count(*) FROM metrics_requests`)[0]; n != keys+2 {
		t.Errorf("%d records, want %d", n, keys+2)
	}
	// The two that waited, then one statement for each write of a key: 5.
	if n := statements.Load(); n != 2+5 {
		t.Errorf("%d statements for %d writes, want 7", n, calls+2)
	}
}

// batchStore is a migrated store on a new database, and its URL.
func batchStore(t *testing.T, opts ledger.Options) (*ledger.Store, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := ledger.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, url
}

// holdInTx runs sql in a transaction left open, to hold the locks it takes
// until the test commits or rolls it back.
func holdInTx(t *testing.T, url, sql string) pgx.Tx {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
	return tx
}

// countStatements counts the statements that contain a string, alone or in
// a batch.
type countStatements struct {
	contains string
	n        *atomic.Int32
}

func (c countStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, c.contains) {
		c.n.Add(1)
	}
	return ctx
}

func (countStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (countStatements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c countStatements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if strings.Contains(data.SQL, c.contains) {
		c.n.Add(1)
	}
}

func (countStatements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
