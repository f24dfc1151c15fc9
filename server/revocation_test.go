package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// TestRevocationEndsSessions: rotating a key ends, at once, the sessions
// that key opened; releasing the client (its agreement deleted) ends the
// rest. A revoked key put back is refused and stays 401.
func TestRevocationEndsSessions(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	ctx := context.Background()
	owner := ledger.Owner{UID: "uid-acme", Name: "team-a/acme"}
	if _, err := e.store.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test", Owner: owner}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	setKey := func() (string, credential.KeyHash) {
		key, _ := credential.NewAPIKey(rand.Reader)
		hash, _ := credential.HashAPIKey(key)
		if _, err := e.store.SetKey(ctx, "acme", hash, e.clock.Now(), 0); err != nil {
			t.Fatal(err)
		}
		return key, hash
	}
	oldKey, oldHash := setKey()
	old := a.mustOpenSession(oldKey, idem("old"))
	if r := a.postMetrics(old.Session.Token, idem("m-old-1"), exampleBody); r.status != http.StatusOK {
		t.Fatalf("metrics before the rotation: %d %s", r.status, r.body)
	}

	newKey, _ := setKey()
	// The API has this session cached: whatever else is wrong with a
	// request, the revocation comes first (401 before any other refusal),
	// and a replay of what the session recorded is refused too.
	for _, tt := range []struct {
		name string
		req  request
	}{
		// Refusals first: the write's own check forgets the session.
		{"malformed JSON", request{idemKey: idem("m-old-3"), body: []byte(`{`)}},
		{"a schema error", request{idemKey: idem("m-old-4"), body: []byte(`{"run_id":"r","cases":[]}`)}},
		{"no Idempotency-Key", request{body: exampleBody}},
		{"a query string", request{path: "/api/svc/v1/metrics?x=1", idemKey: idem("m-old-5"), body: exampleBody}},
		{"a replay", request{idemKey: idem("m-old-1"), body: exampleBody}},
		{"a new request", request{idemKey: idem("m-old-2"), body: exampleBody}},
	} {
		tt.req.method, tt.req.bearer = "POST", old.Session.Token
		if tt.req.path == "" {
			tt.req.path = "/api/svc/v1/metrics"
		}
		r := a.do(tt.req)
		if r.status != http.StatusUnauthorized || r.errorCode(t) != "unauthorized" || !strings.Contains(string(r.body), "revoked") {
			t.Errorf("%s in the old key's session after the rotation: %d %s, want 401 saying the key was revoked", tt.name, r.status, r.body)
		}
	}
	current := a.mustOpenSession(newKey, idem("new"))
	if r := a.postMetrics(current.Session.Token, idem("m-new-1"), exampleBody); r.status != http.StatusOK {
		t.Errorf("the new key's session: %d %s", r.status, r.body)
	}
	if _, err := e.store.SetKey(ctx, "acme", oldHash, e.clock.Now(), 0); err == nil {
		t.Error("the revoked key was accepted again")
	}
	if r, _ := a.openSession(oldKey, idem("old-again")); r.status != http.StatusUnauthorized {
		t.Errorf("the revoked key after an attempt to reinstate it: %d, want 401", r.status)
	}

	if owned, err := e.store.Release(ctx, "acme", owner, e.clock.Now()); !owned || err != nil {
		t.Fatal(owned, err)
	}
	if r := a.postMetrics(current.Session.Token, idem("m-new-2"), exampleBody); r.status != http.StatusUnauthorized {
		t.Errorf("a session after its agreement was deleted: %d %s, want 401", r.status, r.body)
	}
	if r, _ := a.openSession(newKey, idem("after")); r.status != http.StatusUnauthorized {
		t.Errorf("the key after its agreement was deleted: %d, want 401", r.status)
	}
	if u := e.usage("acme"); u.ActiveSessions != 0 || u.ConsumedHours != 2 {
		t.Errorf("usage %+v: want no active session, 2 consumed", u)
	}
}

// TestRotationGracePeriod: after a rotation with a grace period, the old
// key and its sessions work until the deadline and get 401 from then on, by
// the API's clock alone: nobody has to act at the deadline.
func TestRotationGracePeriod(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	ctx := context.Background()
	if _, err := e.store.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test"}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, name := range []string{"old", "new"} {
		key, _ := credential.NewAPIKey(rand.Reader)
		hash, _ := credential.HashAPIKey(key)
		if _, err := e.store.SetKey(ctx, "acme", hash, e.clock.Now(), 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		keys[name] = key
	}
	e.clock.Advance(9 * time.Minute)
	old := a.mustOpenSession(keys["old"], idem("old"))
	if r := a.postMetrics(old.Session.Token, idem("m-1"), exampleBody); r.status != http.StatusOK {
		t.Errorf("the old key's session in the grace period: %d %s", r.status, r.body)
	}
	e.clock.Advance(time.Minute)
	if r, _ := a.openSession(keys["old"], idem("old-late")); r.status != http.StatusUnauthorized {
		t.Errorf("the old key at the end of its grace period: %d, want 401", r.status)
	}
	r := a.postMetrics(old.Session.Token, idem("m-2"), exampleBody)
	if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "revoked") {
		t.Errorf("the old key's session at the end of the grace period: %d %s, want 401 saying the key was revoked", r.status, r.body)
	}
	a.mustOpenSession(keys["new"], idem("new"))
}

// TestLowCreditHeader: usage carries the low-credit warning in a header
// (the body is closed) once the remaining hours reach the threshold, and
// never for a client without one.
func TestLowCreditHeader(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	ctx := context.Background()
	two := 2
	key := e.grant("acme", 3, nil)
	if _, err := e.store.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 3, Source: "test", LowCreditThreshold: &two}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	other := e.grant("other", 1, nil)
	usage := func(key string) string {
		r := a.do(request{method: "GET", path: "/api/svc/v1/usage", bearer: key})
		if r.status != http.StatusOK {
			t.Fatalf("usage: %d %s", r.status, r.body)
		}
		return r.header.Get("Evalmeter-Low-Credit")
	}
	if h := usage(key); h != "" {
		t.Errorf("3 of 3 left: header %q, want none", h)
	}
	a.mustOpenSession(key, idem("one"))
	if h := usage(key); h != "remaining=2, threshold=2" {
		t.Errorf("2 of 3 left: header %q, want remaining=2, threshold=2", h)
	}
	a.mustOpenSession(other, idem("other"))
	if h := usage(other); h != "" {
		t.Errorf("a client without a threshold, none left: header %q, want none", h)
	}
}
