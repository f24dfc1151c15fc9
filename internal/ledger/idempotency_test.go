package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
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
// that holds the key; it neither writes a new version of its row (xmin
// stays) nor waits for a lock on it.
func TestSaveMetricsReplayWritesNothing(t *testing.T) {
	s, sess, url := idemStore(t, 2*time.Second)
	ctx := t.Context()
	first := record("a")
	held, stored, err := s.SaveMetrics(ctx, sess, "key-0000000000001", first, time.Now())
	if err != nil || !stored || string(held.Metrics) != string(first.Metrics) || held.RequestSHA256 != first.RequestSHA256 {
		t.Fatalf("first save: %+v, %v, %v", held, stored, err)
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
		held, stored, err := s.SaveMetrics(ctx, sess, "key-0000000000001", tt.rec, time.Now())
		if err != nil || stored || string(held.Metrics) != string(first.Metrics) || held.RequestSHA256 != first.RequestSHA256 {
			t.Errorf("%s with the row locked: %s, stored %v, %v; want the first record, not stored", tt.name, held.Metrics, stored, err)
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
	held := make([]ledger.MetricsRecord, n)
	for i := range n {
		wg.Go(func() {
			var err error
			held[i], stored[i], err = s.SaveMetrics(t.Context(), sess, "key-concurrent-01", record(fmt.Sprint(i%2)), time.Now())
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
		if held[i].RequestSHA256 != held[0].RequestSHA256 || string(held[i].Metrics) != string(held[0].Metrics) {
			t.Errorf("call %d got record %s, call 0 %s", i, held[i].Metrics, held[0].Metrics)
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
		if held, stored, err := s.SaveMetrics(ctx, tt.sess, tt.key, record("a"), tt.at); !errors.Is(err, ledger.ErrSessionEnded) {
			t.Errorf("%s: %s, stored %v, %v; want ErrSessionEnded", tt.name, held.Metrics, stored, err)
		}
	}
	if n := query[int64](t, url, `SELECT count(*) FROM metrics_requests`); n[0] != 3 {
		t.Errorf("%d metrics records, want 3", n[0])
	}
}
