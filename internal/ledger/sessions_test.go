package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/poll"
)

// TestOpenSessionRacingSameKey: a session opened under a key that another
// call is opening at the same moment waits for it, and then replays its
// session: the credit it had taken is given back.
func TestOpenSessionRacingSameKey(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 5, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	// The first call, in flight: its session written, not yet committed.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const first = "sess_00000000000000000000000a"
	if _, err := tx.Exec(ctx, `
		INSERT INTO sessions (id, client_id, idempotency_key, issued_at, expires_at, token_key_id)
		VALUES ($1, 'acme', 'racing-key-000001', $2, $3, 'k')`, first, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE clients SET consumed_hours = consumed_hours + 1 WHERE client_id = 'acme'`); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		sess   ledger.Session
		replay bool
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		sess, replay, err := s.OpenSession(ctx, "racing-key-000001", ledger.Session{ID: "sess_00000000000000000000000b",
			ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k"}, "test")
		done <- outcome{sess, replay, err}
	}()
	// The second call waits for the first: for its row of clients, then
	// for its key in the unique index.
	poll.Until(t, 10*time.Second, "the second call to wait for the first", func() error {
		if n := query[int64](t, url, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`); n[0] == 0 {
			return errors.New("no statement waits for a lock")
		}
		return nil
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || !got.replay || got.sess.ID != first {
		t.Fatalf("second call: %+v, replay %v, %v; want a replay of %s", got.sess, got.replay, got.err, first)
	}
	u, err := s.Usage(ctx, "acme", t0)
	if err != nil {
		t.Fatal(err)
	}
	if u.ConsumedHours != 1 {
		t.Errorf("consumed %d hours, want 1: the replay kept the credit it had taken", u.ConsumedHours)
	}
	if n := query[int64](t, url, `SELECT count(*) FROM credit_events WHERE kind = 'session'`); n[0] != 0 {
		t.Errorf("%d session credit events; the first call wrote none here, the replay must write none", n[0])
	}
}
