package ledger_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// TestReplaysWaitForStandbys: with synchronous replication, a replay answers
// only once what it returns is on a standby. A writer that gives up waiting
// for its standby (its bound ends and pgx cancels the COMMIT) leaves its
// commit on the primary alone, visible; the replay that finds it must wait
// as the write did, here past its bound since no standby ever comes, rather
// than acknowledge what a failover would lose.
func TestReplaysWaitForStandbys(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	url := cluster.NewDatabase(t)
	must(t, ledger.Migrate(t.Context(), url))
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: time.Second})
	must(t, err)
	defer s.Close()
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	key := sha256.Sum256([]byte("key"))
	mustSetKey(t, s, "acme", key, t0)

	// From here on, every commit that writes waits for a standby that never
	// comes. (ALTER SYSTEM writes no WAL: the reset does not wait.)
	for _, sql := range []string{
		`ALTER SYSTEM SET synchronous_standby_names = 'nowhere'`,
		`ALTER SYSTEM SET synchronous_commit = on`, // the test clusters run with it off
		`SELECT pg_reload_conf()`,
	} {
		_, err := pgtest.Exec(t, url, sql)
		must(t, err)
	}
	t.Cleanup(func() { // before the database is dropped, which would wait too
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `ALTER SYSTEM RESET ALL`); err != nil {
			t.Error(err)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
			t.Error(err)
		}
	})
	polltest.Until(t, 10*time.Second, "the configuration reloaded", func() error {
		if got := query[string](t, url, `SHOW synchronous_standby_names`); got[0] != "nowhere" {
			return fmt.Errorf("synchronous_standby_names = %q", got[0])
		}
		return nil
	})

	sess := ledger.Session{ID: "sess_000000000000000000000001", ClientID: "acme", IssuedAt: t0,
		ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k", Key: key}
	rec := ledger.MetricsRecord{RequestSHA256: sha256.Sum256([]byte("request")), Metrics: []byte(`{"a":1}`)}
	writes := []struct {
		name  string
		call  func() error
		count string // the rows the write leaves
	}{
		{name: "a session", count: `SELECT count(*) FROM sessions WHERE key_sha256 IS NOT NULL`, call: func() error {
			_, _, err := s.OpenSession(ctx, "idempotency-key-0001", sess, "test")
			return err
		}},
		{name: "a session opened without a key (tools)", count: `SELECT count(*) FROM sessions WHERE key_sha256 IS NULL`, call: func() error {
			keyless := sess
			keyless.ID, keyless.Key = "sess_000000000000000000000002", credential.KeyHash{}
			_, _, err := s.OpenSession(ctx, "idempotency-key-0003", keyless, "test")
			return err
		}},
		{name: "a metrics record", count: `SELECT count(*) FROM metrics_requests`, call: func() error {
			_, _, err := s.SaveMetrics(ctx, sess, "idempotency-key-0002", rec, t0)
			return err
		}},
	}
	for _, w := range writes {
		if err := w.call(); !ledger.Unavailable(err) {
			t.Fatalf("%s, written with no standby: %v, want unavailable (its commit waits)", w.name, err)
		}
		// pgx cancels the COMMIT as it closes the connection: the row is
		// then committed here, and only here.
		polltest.Until(t, 10*time.Second, w.name+" committed on the primary alone", func() error {
			if n := query[int64](t, url, w.count); n[0] != 1 {
				return fmt.Errorf("%d rows", n[0])
			}
			return nil
		})
		if err := w.call(); !ledger.Unavailable(err) {
			t.Errorf("%s, replayed: %v; want unavailable, not an answer no standby has confirmed", w.name, err)
		}
	}

	// A refusal is an answer too: the credit that makes it may have been
	// spent by a commit on the primary alone.
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "solo", AllocatedHours: 1, Source: "test"}, t0); !ledger.Unavailable(err) {
		t.Fatalf("a client created with no standby: %v, want unavailable", err)
	}
	polltest.Until(t, 10*time.Second, "the client committed on the primary alone", func() error {
		if n := query[int64](t, url, `SELECT count(*) FROM clients WHERE client_id = 'solo'`); n[0] != 1 {
			return fmt.Errorf("%d rows", n[0])
		}
		return nil
	})
	open := func(key, id string) error {
		_, _, err := s.OpenSession(ctx, key, ledger.Session{ID: id, ClientID: "solo", IssuedAt: t0,
			ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k"}, "test")
		return err
	}
	if err := open("idempotency-key-0004", "sess_000000000000000000000004"); !ledger.Unavailable(err) {
		t.Fatalf("solo's only credit, spent with no standby: %v, want unavailable", err)
	}
	polltest.Until(t, 10*time.Second, "the credit spent on the primary alone", func() error {
		if n := query[int64](t, url, `SELECT consumed_hours FROM clients WHERE client_id = 'solo'`); n[0] != 1 {
			return fmt.Errorf("%d consumed", n[0])
		}
		return nil
	})
	if err := open("idempotency-key-0005", "sess_000000000000000000000005"); !ledger.Unavailable(err) {
		t.Errorf("another session, refused for that credit: %v; want unavailable, not a 402 no standby has confirmed", err)
	}
}
