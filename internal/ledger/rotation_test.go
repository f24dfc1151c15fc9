package ledger_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// TestRotationGracePeriod: a replaced key works, and so do the sessions it
// opens, until the end of its grace period, then neither does: the deadline
// is in the ledger, not in the controller. A later rotation may shorten a
// grace period, never extend it; a rotation without one, or the deletion of
// the agreement, ends every grace period at once.
func TestRotationGracePeriod(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	h := ledger.Owner{UID: "uid", Name: "ns/acme"}
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test", Owner: h}, t0); err != nil {
		t.Fatal(err)
	}
	var k [6]credential.KeyHash
	for i := range k {
		k[i] = sha256.Sum256([]byte{byte(i)})
	}
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
	setKey := func(key credential.KeyHash, when time.Time, grace time.Duration, want ...ledger.RevokedKey) {
		t.Helper()
		got, err := s.SetKey(ctx, "acme", key, when, grace)
		if err != nil {
			t.Fatal(err)
		}
		byFingerprint := cmpopts.SortSlices(func(a, b ledger.RevokedKey) bool { return a.Fingerprint < b.Fingerprint })
		if diff := cmp.Diff(want, got, byFingerprint, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("SetKey(%s, grace %s) revoked (-want +got):\n%s", key.Fingerprint(), grace, diff)
		}
	}
	revoked := func(key credential.KeyHash, until time.Duration) ledger.RevokedKey {
		r := ledger.RevokedKey{Fingerprint: key.Fingerprint()}
		if until > 0 {
			r.UsableUntil = at(until)
		}
		return r
	}

	setKey(k[0], at(0), 0)
	before := openAt(k[0], at(0))
	setKey(k[1], at(time.Minute), 10*time.Minute, revoked(k[0], 11*time.Minute))
	during := openAt(k[0], at(2*time.Minute)) // the old key still opens sessions
	if err := works(at(11*time.Minute-time.Nanosecond), k[0], before, during); err != nil {
		t.Errorf("the old key just before its deadline: %v", err)
	}
	if u, _ := s.Usage(ctx, "acme", at(5*time.Minute)); u.ActiveSessions != 2 {
		t.Errorf("%d active sessions during the grace period, want 2", u.ActiveSessions)
	}
	if err := refused(at(11*time.Minute), k[0], before, during); err != nil {
		t.Errorf("the old key at its deadline: %v", err)
	}
	if u, _ := s.Usage(ctx, "acme", at(11*time.Minute)); u.ActiveSessions != 0 {
		t.Errorf("%d active sessions after the deadline, want 0", u.ActiveSessions)
	}
	if err := works(at(11*time.Minute), k[1]); err != nil {
		t.Errorf("the new key: %v", err)
	}
	setKey(k[1], at(3*time.Minute), time.Hour) // the active key again: nothing
	if _, err := s.SetKey(ctx, "acme", k[0], at(4*time.Minute), 0); !errors.Is(err, ledger.ErrKeyRevoked) {
		t.Errorf("putting back a key in its grace period: %v, want ErrKeyRevoked", err)
	}

	// A second rotation with a longer grace period leaves the first one's
	// deadline; one without ends both at once, and their sessions.
	setKey(k[2], at(5*time.Minute), time.Hour, revoked(k[0], 11*time.Minute), revoked(k[1], 65*time.Minute))
	byK1 := openAt(k[1], at(6*time.Minute))
	if err := works(at(64*time.Minute), k[1], byK1); err != nil {
		t.Errorf("the second key in its grace period: %v", err)
	}
	setKey(k[3], at(7*time.Minute), 0, revoked(k[0], 0), revoked(k[1], 0), revoked(k[2], 0))
	for i, key := range k[:3] {
		if err := refused(at(7*time.Minute), key); err != nil {
			t.Errorf("key %d after a rotation without grace: %v", i, err)
		}
	}
	if err := refused(at(7*time.Minute), k[1], before, during, byK1); err != nil {
		t.Errorf("sessions after a rotation without grace: %v", err)
	}
	if ended := query[string](t, url, `SELECT to_char(ended_at, 'HH24:MI') FROM sessions ORDER BY id`); !cmp.Equal(ended, []string{"09:07", "09:07", "09:07"}) {
		t.Errorf("the sessions of the keys revoked at once end at %v, want all at 09:07", ended)
	}

	// Deleting the agreement revokes at once, grace or not.
	setKey(k[4], at(8*time.Minute), time.Hour, revoked(k[3], 68*time.Minute))
	if ok, err := s.Release(ctx, "acme", h, at(9*time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for i, key := range k[3:5] {
		if err := refused(at(9*time.Minute), key); err != nil {
			t.Errorf("key %d after the agreement was deleted: %v", i+3, err)
		}
	}
}

// TestRevocationNeedsNoClock: a key revoked without a grace period is
// refused, and so are its sessions, whatever clock the caller reads: a
// caller whose clock is behind the revoker's must not keep using it.
func TestRevocationNeedsNoClock(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test"}, t0); err != nil {
		t.Fatal(err)
	}
	k1, k2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	mustSetKey(t, s, "acme", k1, t0)
	id := "sess_000000000000000000000001"
	if _, _, err := s.OpenSession(ctx, "idempotency-key-0001", ledger.Session{
		ID: id, ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k", Key: k1}, "test"); err != nil {
		t.Fatal(err)
	}
	mustSetKey(t, s, "acme", k2, t0.Add(10*time.Minute))
	behind := t0.Add(5 * time.Minute) // the API's clock, behind the controller's
	if _, err := s.ClientByKey(ctx, k1, behind); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the revoked key on a clock behind: %v, want ErrNotFound", err)
	}
	if _, err := s.Session(ctx, id, behind); !errors.Is(err, ledger.ErrSessionEnded) {
		t.Errorf("its session on a clock behind: %v, want ErrSessionEnded", err)
	}
	// A session opened with a key revoked since it was checked: refused,
	// and no credit taken.
	_, _, err := s.OpenSession(ctx, "idempotency-key-0002", ledger.Session{
		ID: "sess_000000000000000000000002", ClientID: "acme", IssuedAt: behind, ExpiresAt: behind.Add(time.Hour), TokenKeyID: "k", Key: k1}, "test")
	if !errors.Is(err, ledger.ErrKeyUnusable) {
		t.Errorf("opening a session with a revoked key: %v, want ErrKeyUnusable", err)
	}
	if u, _ := s.Usage(ctx, "acme", behind); u.ConsumedHours != 1 || u.ActiveSessions != 0 {
		t.Errorf("usage %+v: want 1 consumed (the first session), none active", u)
	}
}
