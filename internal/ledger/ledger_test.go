package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func open(t *testing.T) (*ledger.Store, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := ledger.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, url
}

// TestMigrateConcurrently: several processes migrating one database at
// once (API replicas and the controller starting together) all succeed.
func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = ledger.Migrate(context.Background(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	if err := ledger.Migrate(context.Background(), url); err != nil {
		t.Errorf("migrating an up-to-date database: %v", err)
	}
}

func TestGrantRecordsAllocationEvents(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	steps := []struct {
		hours   int
		created bool
	}{{10, true}, {10, false}, {15, false}, {4, false}}
	for i, step := range steps {
		created, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: step.hours, Source: "test"}, t0.Add(time.Duration(i)*time.Minute))
		if err != nil || created != step.created {
			t.Fatalf("grant %d hours: created %v, %v; want created %v", step.hours, created, err, step.created)
		}
	}
	// One event per change, none for the grant that changed nothing.
	deltas := query[int](t, url, `SELECT allocated_delta FROM credit_events WHERE client_id = 'acme' ORDER BY id`)
	if want := []int{10, 5, -11}; !slices.Equal(deltas, want) {
		t.Errorf("allocation deltas %v, want %v", deltas, want)
	}
	if _, err := pgtest.Exec(t, url, `UPDATE credit_events SET allocated_delta = 0`); err == nil {
		t.Error("credit_events accepted an UPDATE; it must be append-only")
	}
	if _, err := pgtest.Exec(t, url, `DELETE FROM credit_events`); err == nil {
		t.Error("credit_events accepted a DELETE; it must be append-only")
	}
	for _, bad := range []ledger.Grant{
		{ClientID: "Acme", AllocatedHours: 1},
		{ClientID: "-acme", AllocatedHours: 1},
		{ClientID: "", AllocatedHours: 1},
		{ClientID: "acme", AllocatedHours: -1},
	} {
		if _, err := s.UpsertClient(ctx, bad, t0); !errors.Is(err, ledger.ErrInvalid) || ledger.Unavailable(err) {
			t.Errorf("grant %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestKeys(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	for _, id := range []string{"acme", "other"} {
		if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: id, AllocatedHours: 1, Source: "test"}, t0); err != nil {
			t.Fatal(err)
		}
	}
	k1, k2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	mustSetKey(t, s, "acme", k1, t0)
	keyRows := `SELECT xmin::text || '/' || xmax::text FROM api_keys ORDER BY key_sha256`
	rows := query[string](t, url, keyRows)
	mustSetKey(t, s, "acme", k1, t0.Add(time.Minute)) // idempotent, and writes nothing
	if again := query[string](t, url, keyRows); !slices.Equal(rows, again) {
		t.Errorf("setting the active key again wrote its row: xmin/xmax %v, then %v", rows, again)
	}
	if c, err := s.ClientByKey(ctx, k1, t0); err != nil || c.ID != "acme" || c.Key != k1 {
		t.Fatalf("ClientByKey(k1) = %+v, %v", c, err)
	}
	// Rotation: the new key works, the old one is revoked.
	mustSetKey(t, s, "acme", k2, t0)
	if _, err := s.ClientByKey(ctx, k1, t0); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("old key after rotation: %v, want ErrNotFound", err)
	}
	if _, err := s.ClientByKey(ctx, k2, t0); err != nil {
		t.Errorf("new key after rotation: %v", err)
	}
	// A revoked key never comes back, and the active one stays.
	if _, err := s.SetKey(ctx, "acme", k1, t0, 0); !errors.Is(err, ledger.ErrKeyRevoked) || !errors.Is(err, ledger.ErrInvalid) || ledger.Unavailable(err) {
		t.Errorf("putting a revoked key back: %v, want ErrKeyRevoked", err)
	}
	if _, err := s.ClientByKey(ctx, k1, t0); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a revoked key was reinstated: %v", err)
	}
	if _, err := s.ClientByKey(ctx, k2, t0); err != nil {
		t.Errorf("the active key after a refused revoked one: %v", err)
	}
	if _, err := s.SetKey(ctx, "other", k2, t0, 0); !errors.Is(err, ledger.ErrKeyTaken) || ledger.Unavailable(err) {
		t.Errorf("a key of acme given to another client: %v, want ErrKeyTaken", err)
	}
}

func TestMetricsRecords(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 1, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	sess := openSession(t, s, "acme", "sess_000000000000000000000001", t0)
	rec := ledger.MetricsRecord{RequestSHA256: sha256.Sum256([]byte("a")), Metrics: []byte(`{"a":1}`)}
	recorded, stored, err := s.SaveMetrics(ctx, sess, "key-0000000000001", rec, t0)
	if err != nil || !stored || string(recorded.Metrics) != `{"a":1}` {
		t.Fatalf("first save: %v %v %s", err, stored, recorded.Metrics)
	}
	other := ledger.MetricsRecord{RequestSHA256: sha256.Sum256([]byte("b")), Metrics: []byte(`{"b":2}`)}
	recorded, stored, err = s.SaveMetrics(ctx, sess, "key-0000000000001", other, t0.Add(time.Hour))
	if err != nil || stored || recorded.RequestSHA256 != rec.RequestSHA256 || string(recorded.Metrics) != `{"a":1}` {
		t.Errorf("second save under the key: stored %v, recorded %s, %v; want the first record", stored, recorded.Metrics, err)
	}
	// Records older than the cutoff go; newer ones stay.
	if _, stored, _ := s.SaveMetrics(ctx, sess, "key-0000000000002", rec, t0.Add(23*time.Hour)); !stored {
		t.Fatal("second key not stored")
	}
	n, busy, err := s.PruneMetrics(ctx, t0.Add(time.Minute), 1)
	if err != nil || n != 1 || busy {
		t.Errorf("pruned %d, %v; want 1", n, err)
	}
	if _, stored, _ := s.SaveMetrics(ctx, sess, "key-0000000000001", other, t0.Add(25*time.Hour)); !stored {
		t.Error("a pruned key is free again")
	}
	if _, stored, _ := s.SaveMetrics(ctx, sess, "key-0000000000002", other, t0.Add(25*time.Hour)); stored {
		t.Error("a record younger than the cutoff was pruned")
	}
}

// TestMigrateWaitsForPostgreSQL: a migration started before PostgreSQL (the
// controller and the API's init container start beside the database) waits
// for it; one that PostgreSQL refuses fails at once.
func TestMigrateWaitsForPostgreSQL(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	url := cluster.NewDatabase(t)
	must(t, cluster.Stop())
	done := make(chan error, 1)
	go func() { done <- ledger.Migrate(t.Context(), url) }()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("Migrate returned while PostgreSQL was down: %v", err)
	default:
	}
	must(t, cluster.Restart())
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Migrate still waiting 30 s after PostgreSQL started")
	}

	nobody, err := neturl.Parse(url)
	must(t, err)
	nobody.User = neturl.User("nobody")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := ledger.Migrate(ctx, nobody.String()); err == nil || ctx.Err() != nil {
		t.Errorf("Migrate as an unknown user: %v (context: %v), want a prompt error", err, ctx.Err())
	}
}

func TestUnavailable(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	url := cluster.NewDatabase(t)
	must(t, ledger.Migrate(t.Context(), url))
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Client(t.Context(), "nobody"); !errors.Is(err, ledger.ErrNotFound) || ledger.Unavailable(err) {
		t.Errorf("a missing client: %v", err)
	}
	_, err = pgtest.Exec(t, url, `SELECT 1/0`)
	if err == nil || ledger.Unavailable(err) {
		t.Errorf("a division by zero is a bug, not unavailability: %v", err)
	}
	must(t, cluster.Stop())
	_, err = s.Client(t.Context(), "nobody")
	if !ledger.Unavailable(err) {
		t.Errorf("with PostgreSQL stopped: %v is not Unavailable", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping succeeded with PostgreSQL stopped")
	}
}

func query[T any](t *testing.T, url, sql string, args ...any) []T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustSetKey makes hash the client's key, revoking the others at once.
func mustSetKey(t *testing.T, s *ledger.Store, clientID string, hash credential.KeyHash, now time.Time) {
	t.Helper()
	if _, err := s.SetKey(t.Context(), clientID, hash, now, 0); err != nil {
		t.Fatal(err)
	}
}

// waitForLocks waits until n statements like pattern wait for a lock.
func waitForLocks(t *testing.T, url, pattern string, n int64) {
	t.Helper()
	polltest.Until(t, 20*time.Second, fmt.Sprintf("%d statements like %s waiting for a lock", n, pattern), func() error {
		got := query[int64](t, url, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, pattern)[0]
		if got != n {
			return fmt.Errorf("%d wait", got)
		}
		return nil
	})
}
