package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/polltest"
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
	polltest.Until(t, 10*time.Second, "the second call to wait for the first", func() error {
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

// TestOpenSessionBatched: opens of a client that wait while one runs go
// together in one transaction, and each gets what it would have alone:
// opened while credits last, a replay of its key, ErrNoCredit, or
// ErrKeyUnusable for a revoked key, with no credit spent twice.
func TestOpenSessionBatched(t *testing.T) {
	ctx := t.Context()
	var batches atomic.Int32
	s, url := batchStore(t, ledger.Options{Timeout: 20 * time.Second, Tracer: countStatements{"WITH ORDINALITY", &batches}})
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 20, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	revoked, current := credential.KeyHash(sha256.Sum256([]byte("revoked"))), credential.KeyHash(sha256.Sum256([]byte("current")))
	for _, k := range []credential.KeyHash{revoked, current} {
		if _, err := s.SetKey(ctx, "acme", k, t0, 0); err != nil {
			t.Fatal(err)
		}
	}
	session := func(n int, key credential.KeyHash) ledger.Session {
		return ledger.Session{ID: fmt.Sprintf("sess_%024x", n), ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k", Key: key}
	}

	// The first open waits for the client's row, so the others queue.
	tx := holdInTx(t, url, `SELECT FROM clients WHERE client_id = 'acme' FOR UPDATE`)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, replay, err := s.OpenSession(ctx, "first-open-000001", session(1, current), "test"); err != nil || replay {
			t.Errorf("first open: replay %v, %v", replay, err)
		}
	})
	waitForLocks(t, url, "%", 1)

	// 30 keys, the first 10 asked twice; keys 9, 19 and 29 by the revoked
	// API key, 8, 18 and 28 by none (as tools open them).
	const calls, keys = 40, 30
	type outcome struct {
		sess   ledger.Session
		replay bool
		err    error
	}
	out := make([]outcome, calls)
	ask := func(i int) {
		key := current
		switch i % 10 {
		case 9:
			key = revoked
		case 8:
			key = credential.KeyHash{}
		}
		wg.Go(func() {
			o := &out[i]
			o.sess, o.replay, o.err = s.OpenSession(ctx, fmt.Sprintf("batch-open-%05d", i%keys), session(100+i, key), "test")
		})
	}
	queued := func(n int) {
		polltest.Until(t, 20*time.Second, fmt.Sprintf("%d opens queued", n), func() error {
			if got := ledger.QueuedOpens(s, "acme"); got != n {
				return fmt.Errorf("%d queued", got)
			}
			return nil
		})
	}
	// The second asks queue after the first ones: the queue's order, not
	// the goroutines' start, decides which of two asks of a key comes first.
	for i := range keys {
		ask(i)
	}
	queued(keys)
	for i := keys; i < calls; i++ {
		ask(i)
	}
	queued(calls)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	opened, refused, refusedTwice := 0, 0, 0
	byKey := map[int]string{}
	for i, o := range out {
		k := i % keys
		switch {
		case i%10 == 9:
			if !errors.Is(o.err, ledger.ErrKeyUnusable) {
				t.Errorf("open %d, by the revoked key: %+v, %v; want ErrKeyUnusable", i, o.sess, o.err)
			}
		case errors.Is(o.err, ledger.ErrNoCredit) && i >= keys:
			refusedTwice++
		case errors.Is(o.err, ledger.ErrNoCredit):
			refused++
		case o.err != nil:
			t.Errorf("open %d: %v", i, o.err)
		case o.replay:
			if i < keys {
				t.Errorf("open %d replayed, but it came first", i)
			}
		default:
			opened++
			if byKey[k] != "" {
				t.Errorf("key %d opened twice: %s and %s", k, byKey[k], o.sess.ID)
			}
			byKey[k] = o.sess.ID
		}
	}
	for i := keys; i < calls; i++ { // the second open of a key: as the first
		first, second := out[i-keys], out[i]
		if first.err == nil && (!second.replay || second.sess.ID != first.sess.ID) {
			t.Errorf("open %d: %+v, replay %v, %v; want a replay of %s", i, second.sess, second.replay, second.err, first.sess.ID)
		}
	}
	// 19 credits after the first; 27 keys asked by the usable API key.
	if opened != 19 || refused != 8 {
		t.Errorf("opened %d, refused %d; want 19 opened, the rest refused", opened, refused)
	}
	got := query[int64](t, url, `SELECT (SELECT count(*) FROM sessions) * 10000 + (SELECT count(*) FROM credit_events WHERE kind = 'session') * 100 + (SELECT consumed_hours FROM clients)`)[0]
	if got != 20*10000+20*100+20 {
		t.Errorf("sessions, session events, consumed: %d; want 20 each", got)
	}
	// The 30 first asks in one transaction, the 10 second asks in another.
	if n := batches.Load(); n != 2 {
		t.Errorf("%d transactions for the %d opens that waited, want 2", n, calls)
	}
}

// TestOpenSessionBatchTimesOut: opens that wait behind one that waits for
// the client's row past the bound fail too, and leave no trace: the batch's
// lock_timeout ends its wait before its callers give up.
func TestOpenSessionBatchTimesOut(t *testing.T) {
	ctx := t.Context()
	s, url := batchStore(t, ledger.Options{Timeout: 600 * time.Millisecond})
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	tx := holdInTx(t, url, `SELECT FROM clients WHERE client_id = 'acme' FOR UPDATE`)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			_, _, errs[i] = s.OpenSession(ctx, fmt.Sprintf("timed-out-%06d", i), ledger.Session{ID: fmt.Sprintf("sess_%024x", i+1),
				ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k"}, "test")
		})
	}
	wg.Wait()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !ledger.Unavailable(err) {
			t.Errorf("open %d with the row locked past the bound: %v; want unavailable", i, err)
		}
	}
	if got := query[int64](t, url, `SELECT (SELECT count(*) FROM sessions) + (SELECT consumed_hours FROM clients)`)[0]; got != 0 {
		t.Errorf("sessions and credits left behind: %d", got)
	}
}

// TestOpenSessionBatchLeavesMetricsFree: while a batch of opens holds the
// client's row, the client's metrics records are still written: the
// batch's lock is an UPDATE's, which their foreign key checks do not wait for.
func TestOpenSessionBatchLeavesMetricsFree(t *testing.T) {
	ctx := t.Context()
	s, url := batchStore(t, ledger.Options{Timeout: 20 * time.Second})
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 5, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	key := credential.KeyHash(sha256.Sum256([]byte("key")))
	if _, err := s.SetKey(ctx, "acme", key, t0, 0); err != nil {
		t.Fatal(err)
	}
	// The batch will stop at the API key's row, after taking the client's.
	keyRow := holdInTx(t, url, `SELECT FROM api_keys FOR UPDATE`)
	clientRow := holdInTx(t, url, `SELECT FROM clients WHERE client_id = 'acme' FOR NO KEY UPDATE`)
	var wg sync.WaitGroup
	open := func(n int, key credential.KeyHash) {
		wg.Go(func() {
			sess := ledger.Session{ID: fmt.Sprintf("sess_%024x", n), ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k", Key: key}
			if _, _, err := s.OpenSession(ctx, fmt.Sprintf("open-%012d", n), sess, "test"); err != nil {
				t.Errorf("open %d: %v", n, err)
			}
		})
	}
	open(1, credential.KeyHash{}) // by no key: it waits for the client's row only
	waitForLocks(t, url, "%clients%", 1)
	open(2, key)
	open(3, key)
	polltest.Until(t, 20*time.Second, "two opens queued", func() error {
		if n := ledger.QueuedOpens(s, "acme"); n != 2 {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	if err := clientRow.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitForLocks(t, url, "%ORDINALITY%", 1)

	sess, err := s.Session(ctx, fmt.Sprintf("sess_%024x", 1), t0)
	if err != nil {
		t.Fatal(err)
	}
	saveCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, stored, err := s.SaveMetrics(saveCtx, sess, "metrics-during-batch", record("a"), t0); err != nil || !stored {
		t.Errorf("save while a batch of opens holds the client: stored %v, %v", stored, err)
	}
	if err := keyRow.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
