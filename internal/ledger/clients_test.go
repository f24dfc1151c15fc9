package ledger_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// TestOwners: the first agreement to write a client owns it; another is
// refused until the owner releases it, and the CLI may not change an owned
// client.
func TestOwners(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	a := ledger.Owner{UID: "uid-a", Name: "team-a/acme"}
	b := ledger.Owner{UID: "uid-b", Name: "team-b/acme"}
	grant := func(h ledger.Owner, hours int) error {
		_, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: hours, Source: "ClientAgreement " + h.Name, Owner: h}, t0)
		return err
	}
	must(t, grant(a, 2))
	var owned *ledger.OwnedError
	if err := grant(b, 9); !errors.As(err, &owned) || owned.Owner != a || ledger.Unavailable(err) {
		t.Fatalf("a second agreement's grant: %v, want OwnedError naming %v", err, a)
	}
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 5, Source: "cli"}, t0); !errors.As(err, &owned) {
		t.Errorf("the CLI changing an owned client: %v, want OwnedError", err)
	}
	must(t, grant(a, 3)) // the owner still writes
	if c, _ := s.Client(ctx, "acme"); c.AllocatedHours != 3 {
		t.Errorf("allocation %d, want the owner's 3", c.AllocatedHours)
	}

	// Releasing on behalf of a stale owner that is not the owner does nothing.
	must(t, s.ReleaseStale(ctx, "acme", b, t0))
	if err := grant(b, 9); !errors.As(err, &owned) {
		t.Errorf("after releasing an owner that never owned: %v", err)
	}
	if ok, err := s.Release(ctx, "acme", b, t0); ok || err != nil {
		t.Errorf("Release by a non-owner: %v, %v; want false", ok, err)
	}
	// The owner's release lets the other take over.
	if ok, err := s.Release(ctx, "acme", a, t0); !ok || err != nil {
		t.Fatalf("Release by the owner: %v, %v", ok, err)
	}
	must(t, grant(b, 9))
	if c, _ := s.Client(ctx, "acme"); c.AllocatedHours != 9 {
		t.Errorf("allocation %d after the takeover, want 9", c.AllocatedHours)
	}
	must(t, s.ReleaseStale(ctx, "acme", b, t0))
	must(t, grant(a, 4))
}

// TestGrantWritesOnlyChanges: a grant equal to the row (the controller's
// periodic resync) neither writes nor locks the client's row.
func TestGrantWritesOnlyChanges(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	end := time.Date(2027, 6, 30, 23, 59, 59, 123456789, time.UTC)
	g := ledger.Grant{ClientID: "acme", AllocatedHours: 2, ValidUntil: &end, Source: "ClientAgreement ns/acme",
		Owner: ledger.Owner{UID: "uid", Name: "ns/acme"}}
	if _, err := s.UpsertClient(ctx, g, t0); err != nil {
		t.Fatal(err)
	}
	row := `SELECT xmin::text || '/' || xmax::text FROM clients`
	before := query[string](t, url, row)
	for i := range 3 {
		if created, err := s.UpsertClient(ctx, g, t0.Add(time.Duration(i)*time.Minute)); created || err != nil {
			t.Fatal(created, err)
		}
	}
	if after := query[string](t, url, row); !slices.Equal(before, after) {
		t.Errorf("unchanged grants wrote or locked the row: xmin/xmax %v, then %v", before, after)
	}
	g.AllocatedHours = 3
	if _, err := s.UpsertClient(ctx, g, t0); err != nil {
		t.Fatal(err)
	}
	if after := query[string](t, url, row); slices.Equal(before, after) {
		t.Error("a changed grant did not write the row")
	}
}

// TestRevocationEndsSessions: rotating a key ends the sessions it opened and
// no other; releasing the client ends all of them.
func TestRevocationEndsSessions(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	h := ledger.Owner{UID: "uid", Name: "ns/acme"}
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test", Owner: h}, t0); err != nil {
		t.Fatal(err)
	}
	k1, k2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	mustSetKey(t, s, "acme", k1, t0)
	n := 0
	open := func(key credential.KeyHash) string {
		n++
		id := fmt.Sprintf("sess_%024x", n)
		_, _, err := s.OpenSession(ctx, fmt.Sprintf("idempotency-key-%04d", n), ledger.Session{
			ID: id, ClientID: "acme", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), TokenKeyID: "k", Key: key}, "test")
		must(t, err)
		return id
	}
	byOld := open(k1)
	mustSetKey(t, s, "acme", k2, t0.Add(time.Minute))
	byNew := open(k2)
	if _, err := s.Session(ctx, byOld, t0.Add(2*time.Minute)); !errors.Is(err, ledger.ErrSessionEnded) || !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a session of the rotated key: %v, want ErrSessionEnded", err)
	}
	if sess, err := s.Session(ctx, byNew, t0.Add(2*time.Minute)); err != nil || sess.Key != k2 {
		t.Errorf("a session of the new key: %+v, %v", sess, err)
	}
	if u, _ := s.Usage(ctx, "acme", t0.Add(2*time.Minute)); u.ActiveSessions != 1 || u.ConsumedHours != 2 {
		t.Errorf("usage %+v: want 1 active session of 2 consumed", u)
	}

	if ok, err := s.Release(ctx, "acme", h, t0.Add(2*time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := s.Session(ctx, byNew, t0.Add(2*time.Minute)); !errors.Is(err, ledger.ErrSessionEnded) {
		t.Errorf("a session after its client was released: %v, want ErrSessionEnded", err)
	}
	if _, err := s.ClientByKey(ctx, k2, t0.Add(2*time.Minute)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the key after its client was released: %v", err)
	}
	if ended := query[int](t, url, `SELECT count(*)::int FROM sessions WHERE ended_at IS NOT NULL`); ended[0] != 2 {
		t.Errorf("%d sessions ended, want 2", ended[0])
	}
}
