package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// idemStore is a migrated store with client acme and a session of acme's,
// and its URL.
func idemStore(t *testing.T, timeout time.Duration) (*ledger.Store, ledger.Session, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := ledger.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.UpsertClient(t.Context(), ledger.Grant{ClientID: "acme", AllocatedHours: 1, Source: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return s, openSession(t, s, "acme", "sess_000000000000000000000001", time.Now()), url
}

// openSession opens a session of clientID without an API key (as tools
// do), spending one of its credits.
func openSession(t *testing.T, s *ledger.Store, clientID, id string, now time.Time) ledger.Session {
	t.Helper()
	sess, _, err := s.OpenSession(t.Context(), "open-"+id, ledger.Session{
		ID: id, ClientID: clientID, IssuedAt: now, ExpiresAt: now.Add(time.Hour), TokenKeyID: "k"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func record(body string) ledger.MetricsRecord {
	return ledger.MetricsRecord{RequestSHA256: sha256.Sum256([]byte(body)), Metrics: []byte(`{"m":"` + body + `"}`)}
}

// TestSaveMetricsReplayWritesNothing: a replay or a conflict reads the record
// under the key; it neither writes a new version of its row (xmin
// stays) nor waits for a lock on it.
func TestSaveMetricsReplayWritesNothing(t *testing.T) {
	s, sess, url := idemStore(t, 2*time.Second)
	ctx := t.Context()
	first := record("a")
	recorded, stored, err := s.SaveMetrics(ctx, sess, "key-0000000000001", first, time.Now())
	if err != nil || !stored || string(recorded.Metrics) != string(first.Metrics) || recorded.RequestSHA256 != first.RequestSHA256 {
		t.Fatalf("first save: %+v, %v, %v", recorded, stored, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	xmin := func() string {
		t.Helper()
		var x string
		if err := conn.QueryRow(ctx, `SELECT xmin::text FROM metrics_requests WHERE idempotency_key = 'key-0000000000001'`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := xmin()

	// Another transaction holds the row: a replay must not wait for it.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM metrics_requests WHERE idempotency_key = 'key-0000000000001' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		rec  ledger.MetricsRecord
	}{
		{"replay", first},
		{"conflict", record("b")},
	} {
		recorded, stored, err := s.SaveMetrics(ctx, sess, "key-0000000000001", tt.rec, time.Now())
		if err != nil || stored || string(recorded.Metrics) != string(first.Metrics) || recorded.RequestSHA256 != first.RequestSHA256 {
			t.Errorf("%s with the row locked: %s, stored %v, %v; want the first record, not stored", tt.name, recorded.Metrics, stored, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if after := xmin(); after != before {
		t.Errorf("xmin of the record went from %s to %s: a replay wrote a new version of the row", before, after)
	}
}

// TestSaveMetricsConcurrently: concurrent saves under one key store exactly
// one record, and every other call gets that record back.
func TestSaveMetricsConcurrently(t *testing.T) {
	s, sess, _ := idemStore(t, 10*time.Second)
	const n = 16
	var wg sync.WaitGroup
	stored := make([]bool, n)
	recorded := make([]ledger.MetricsRecord, n)
	for i := range n {
		wg.Go(func() {
			var err error
			recorded[i], stored[i], err = s.SaveMetrics(t.Context(), sess, "key-concurrent-01", record(fmt.Sprint(i%2)), time.Now())
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if stored[i] {
			winners++
		}
		if recorded[i].RequestSHA256 != recorded[0].RequestSHA256 || string(recorded[i].Metrics) != string(recorded[0].Metrics) {
			t.Errorf("call %d got record %s, call 0 %s", i, recorded[i].Metrics, recorded[0].Metrics)
		}
	}
	if winners != 1 {
		t.Errorf("%d of %d concurrent saves stored a record, want 1", winners, n)
	}
}

// TestSaveMetricsEndedSession: a session that has ended since the caller
// authenticated it records nothing and replays nothing, whether it was
// ended outright or its key's grace period ran out.
func TestSaveMetricsEndedSession(t *testing.T) {
	s, keyless, url := idemStore(t, 2*time.Second)
	ctx := t.Context()
	now := time.Now()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 2, Source: "test"}, now); err != nil {
		t.Fatal(err)
	}
	old, newer := credential.KeyHash(sha256.Sum256([]byte("old"))), credential.KeyHash(sha256.Sum256([]byte("new")))
	if _, err := s.SetKey(ctx, "acme", old, now, 0); err != nil {
		t.Fatal(err)
	}
	keyed := ledger.Session{ID: "sess_000000000000000000000002", ClientID: "acme", IssuedAt: now,
		ExpiresAt: now.Add(time.Hour), TokenKeyID: "k", Key: old}
	if _, _, err := s.OpenSession(ctx, "open-keyed-session-1", keyed, "test"); err != nil {
		t.Fatal(err)
	}
	for _, sess := range []ledger.Session{keyless, keyed} {
		if _, stored, err := s.SaveMetrics(ctx, sess, "key-"+sess.ID, record("a"), now); err != nil || !stored {
			t.Fatalf("save in live session %s: stored %v, %v", sess.ID, stored, err)
		}
	}

	if _, err := pgtest.Exec(t, url, `UPDATE sessions SET ended_at = now() WHERE id = '`+keyless.ID+`'`); err != nil {
		t.Fatal(err)
	}
	// The old key stays usable for a minute, then its sessions end, by the
	// clock alone.
	if _, err := s.SetKey(ctx, "acme", newer, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Minute)
	if _, stored, err := s.SaveMetrics(ctx, keyed, "key-in-grace-0001", record("b"), now.Add(time.Second)); err != nil || !stored {
		t.Fatalf("save during the grace period: stored %v, %v", stored, err)
	}
	for _, tt := range []struct {
		name string
		sess ledger.Session
		key  string
		at   time.Time
	}{
		{"replay in an ended session", keyless, "key-" + keyless.ID, now},
		{"new key in an ended session", keyless, "key-new-000000001", now},
		{"replay after the grace period", keyed, "key-" + keyed.ID, later},
		{"new key after the grace period", keyed, "key-new-000000002", later},
	} {
		if recorded, stored, err := s.SaveMetrics(ctx, tt.sess, tt.key, record("a"), tt.at); !errors.Is(err, ledger.ErrSessionEnded) {
			t.Errorf("%s: %s, stored %v, %v; want ErrSessionEnded", tt.name, recorded.Metrics, stored, err)
		}
	}
	if n := query[int64](t, url, `SELECT count(*) FROM metrics_requests`); n[0] != 3 {
		t.Errorf("%d metrics records, want 3", n[0])
	}
}

// TestSaveMetricsBatched: writes that wait while the writer's statements
// run go together, at most one of a key in a statement, and each gets its
// own outcome: stored, the record already under its key, or ErrSessionEnded.
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
				t.Errorf("save %s after the transaction that locked it rolled back: stored %v, %v", key, stored, err)
			}
		})
	}
	waitForLocks(t, url, "%unnest%", 2)

	const calls, keys = 45, 10
	type outcome struct {
		recorded ledger.MetricsRecord
		stored   bool
		err      error
	}
	out := make([]outcome, calls)
	for i := range calls {
		wg.Go(func() {
			o := &out[i]
			o.recorded, o.stored, o.err = s.SaveMetrics(ctx, sessions[i%3], fmt.Sprintf("batch-key-%05d", i%keys), record(fmt.Sprint(i%keys)), now)
		})
	}
	polltest.Until(t, 20*time.Second, "every write queued", func() error {
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
		case o.recorded.RequestSHA256 != record(fmt.Sprint(i%keys)).RequestSHA256:
			t.Errorf("write %d got the record %s", i, o.recorded.Metrics)
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
