package ledger_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// TestRotationGracePeriod: a replaced key works, and so do the sessions it
// opens, until the end of its grace period, then neither does, whoever
// writes what: the deadline is in the ledger, not in the controller.
func TestRotationGracePeriod(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	h := ledger.Holder{UID: "uid", Name: "ns/acme"}
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test", Holder: h}, t0); err != nil {
		t.Fatal(err)
	}
	k1, k2, k3 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two")), sha256.Sum256([]byte("three"))
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	n := 0
	openAt := func(key credential.KeyHash, issued time.Time) string {
		n++
		id := fmt.Sprintf("sess_%024x", n)
		_, _, err := s.OpenSession(ctx, fmt.Sprintf("idempotency-key-%04d", n), ledger.Session{
			ID: id, ClientID: "acme", IssuedAt: issued, ExpiresAt: issued.Add(time.Hour), TokenKeyID: "k", Key: key}, "test")
		must(t, err)
		return id
	}
	works := func(when time.Time, key credential.KeyHash, sessions ...string) error {
		if _, err := s.ClientByKey(ctx, key, when); err != nil {
			return fmt.Errorf("key: %w", err)
		}
		for _, id := range sessions {
			if _, err := s.Session(ctx, id, when); err != nil {
				return fmt.Errorf("session %s: %w", id, err)
			}
		}
		return nil
	}
	refused := func(when time.Time, key credential.KeyHash, sessions ...string) error {
		if _, err := s.ClientByKey(ctx, key, when); !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("key: %v, want ErrNotFound", err)
		}
		for _, id := range sessions {
			if _, err := s.Session(ctx, id, when); !errors.Is(err, ledger.ErrSessionEnded) {
				return fmt.Errorf("session %s: %v, want ErrSessionEnded", id, err)
			}
		}
		return nil
	}

	mustSetKey(t, s, "acme", k1, at(0))
	before := openAt(k1, at(0))
	pending, err := s.SetKey(ctx, "acme", k2, at(time.Minute), 10*time.Minute)
	if err != nil || !pending.Equal(at(11*time.Minute)) {
		t.Fatalf("rotating with 10m of grace at +1m: pending until %v, %v; want %v", pending, err, at(11*time.Minute))
	}
	during := openAt(k1, at(2*time.Minute)) // the old key still opens sessions
	if err := works(at(11*time.Minute-time.Nanosecond), k1, before, during); err != nil {
		t.Errorf("the old key just before its deadline: %v", err)
	}
	if u, _ := s.Usage(ctx, "acme", at(5*time.Minute)); u.ActiveSessions != 2 {
		t.Errorf("%d active sessions during the grace period, want 2", u.ActiveSessions)
	}
	if err := refused(at(11*time.Minute), k1, before, during); err != nil {
		t.Errorf("the old key at its deadline: %v", err)
	}
	if u, _ := s.Usage(ctx, "acme", at(11*time.Minute)); u.ActiveSessions != 0 {
		t.Errorf("%d active sessions after the deadline, want 0", u.ActiveSessions)
	}
	if err := works(at(11*time.Minute), k2); err != nil {
		t.Errorf("the new key: %v", err)
	}

	// Again with the active key: nothing written, the deadline reported.
	if pending, err := s.SetKey(ctx, "acme", k2, at(3*time.Minute), time.Hour); err != nil || !pending.Equal(at(11*time.Minute)) {
		t.Errorf("the active key again: pending until %v, %v; want %v", pending, err, at(11*time.Minute))
	}
	// A key in its grace period is revoked all the same: it never comes back.
	if _, err := s.SetKey(ctx, "acme", k1, at(4*time.Minute), 0); !errors.Is(err, ledger.ErrKeyRevoked) {
		t.Errorf("putting back a key in its grace period: %v, want ErrKeyRevoked", err)
	}
	// A second rotation does not extend the first one's deadline.
	if pending, err := s.SetKey(ctx, "acme", k3, at(5*time.Minute), time.Hour); err != nil || !pending.Equal(at(65*time.Minute)) {
		t.Errorf("a second rotation: pending until %v, %v; want %v", pending, err, at(65*time.Minute))
	}
	if err := refused(at(11*time.Minute), k1, before, during); err != nil {
		t.Errorf("the first key after a second rotation: %v", err)
	}
	if err := works(at(64*time.Minute), k2); err != nil {
		t.Errorf("the second key in its own grace period: %v", err)
	}
	if ended := query[string](t, url, `SELECT to_char(ended_at, 'HH24:MI') FROM sessions ORDER BY id`); len(ended) != 2 || ended[0] != "09:11" || ended[1] != "09:11" {
		t.Errorf("the old key's sessions end at %v, want both at 09:11", ended)
	}

	// Deleting the agreement revokes at once, grace or not.
	if ok, err := s.Release(ctx, "acme", h, at(6*time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := refused(at(6*time.Minute), k2); err != nil {
		t.Errorf("a key in its grace period after the agreement was deleted: %v", err)
	}
}

// TestSessionEndsWithItsKey: a session whose key was revoked is refused even
// when its own row says nothing, as after a session opened concurrently with
// the revocation.
func TestSessionEndsWithItsKey(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	k := sha256.Sum256([]byte("one"))
	mustSetKey(t, s, "acme", k, t0)
	id := "sess_000000000000000000000001"
	if _, _, err := s.OpenSession(ctx, "idempotency-key-0001", ledger.Session{
		ID: id, ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k", Key: k}, "test"); err != nil {
		t.Fatal(err)
	}
	query[int](t, url, `UPDATE api_keys SET revoked_at = '2026-11-21T09:05:00Z' RETURNING 1`)
	if _, err := s.Session(ctx, id, t0.Add(4*time.Minute)); err != nil {
		t.Errorf("before the key's revocation: %v", err)
	}
	if _, err := s.Session(ctx, id, t0.Add(5*time.Minute)); !errors.Is(err, ledger.ErrSessionEnded) {
		t.Errorf("after the key's revocation: %v, want ErrSessionEnded", err)
	}
	if u, _ := s.Usage(ctx, "acme", t0.Add(5*time.Minute)); u.ActiveSessions != 0 {
		t.Errorf("%d active sessions after the key's revocation, want 0", u.ActiveSessions)
	}
}
