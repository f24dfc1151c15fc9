package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
	"github.com/evalmeter/evalmeter/controllers"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/envtesttest"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// TestKeyOfAnotherClient: a Secret holding another client's key is an
// InvalidAPIKey, not a ledger outage retried for ever.
func TestKeyOfAnotherClient(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	for _, name := range []string{"one", "two"} {
		if err := k8sClient.Create(ctx, agreement(ns, name, "acme-taken-"+name, 1)); err != nil {
			t.Fatal(err)
		}
		phase(t, ns, name, evalmeterv1alpha1.PhaseActive)
	}
	oneKey, _ := apiKey(ns, "one")
	setAPIKey(t, ns, "two", oneKey)
	waitReady(t, ns, "two", "InvalidAPIKey", "belongs to another client")
	if c, err := store.ClientByKey(ctx, mustHash(t, oneKey), time.Now()); err != nil || c.ID != "acme-taken-one" {
		t.Errorf("the key moved: %+v, %v", c, err)
	}
}

// TestResyncReadsOnly: the periodic resync (2 s in the suite) reads the
// ledger and writes nothing: the client's and its keys' rows keep their
// xmin and xmax (no update, no row lock).
func TestResyncReadsOnly(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, agreement(ns, "quiet", "acme-resync", 3)); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "quiet", evalmeterv1alpha1.PhaseActive)
	before := rowVersions(t, "acme-resync")

	// A spec change the ledger does not hold makes the controller go
	// through the same reconcile as a resync, and lets the test see it did.
	ca := get(t, ns, "quiet")
	ca.Spec.OrderReference = "PO-test-2"
	if err := k8sClient.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "quiet", evalmeterv1alpha1.PhaseActive)
	time.Sleep(5 * time.Second) // and two resyncs more
	if after := rowVersions(t, "acme-resync"); after != before {
		t.Errorf("reconciling an unchanged agreement wrote the ledger: xmin/xmax %s, then %s", before, after)
	}
}

// rowVersions is the xmin/xmax of the client's row and of its keys' rows.
func rowVersions(t *testing.T, clientID string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	err = conn.QueryRow(ctx, `
		SELECT (SELECT xmin::text || '/' || xmax::text FROM clients WHERE client_id = $1) || ' keys ' ||
		       (SELECT string_agg(xmin::text || '/' || xmax::text, ',' ORDER BY key_sha256) FROM api_keys WHERE client_id = $1)`,
		clientID).Scan(&v)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSecretCache: the manager caches only the Secrets it manages, and
// adopts a Secret the operator made, through the API server.
func TestSecretCache(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	key, _ := credential.NewAPIKey(rand.Reader)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, StringData: map[string]string{"blob": "x"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopt-api-key"}, StringData: map[string]string{controllers.APIKeySecretKey: key}},
	} {
		if err := k8sClient.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8sClient.Create(ctx, agreement(ns, "adopt", "acme-adopt", 1)); err != nil {
		t.Fatal(err)
	}
	ca := phase(t, ns, "adopt", evalmeterv1alpha1.PhaseActive)
	if ca.Status.APIKeyFingerprint != mustHash(t, key).Fingerprint() {
		t.Errorf("fingerprint %s: the operator's key was not adopted", ca.Status.APIKeyFingerprint)
	}
	var adopted corev1.Secret
	if err := k8sClient.Get(ctx, objectKey(ns, "adopt-api-key"), &adopted); err != nil {
		t.Fatal(err)
	}
	if len(adopted.OwnerReferences) != 0 {
		t.Errorf("the adopted Secret got owners %v: deleting the agreement would delete the operator's Secret", adopted.OwnerReferences)
	}
	polltest.Until(t, wait, "the adopted Secret in the cache", func() error {
		return managerCache.Get(ctx, objectKey(ns, "adopt-api-key"), &corev1.Secret{})
	})
	var s corev1.Secret
	if err := managerCache.Get(ctx, objectKey(ns, "unrelated"), &s); !apierrors.IsNotFound(err) {
		t.Errorf("the cache holds a Secret the controller does not manage: %v", err)
	}

	// Replacing the adopted Secret's key rotates it, though no owner
	// reference ties the Secret to the agreement.
	newKey, _ := credential.NewAPIKey(rand.Reader)
	adopted.Data = map[string][]byte{controllers.APIKeySecretKey: []byte(newKey)}
	if err := k8sClient.Update(ctx, &adopted); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, wait, "rotation of the adopted key", func() error {
		if fp := get(t, ns, "adopt").Status.APIKeyFingerprint; fp != mustHash(t, newKey).Fingerprint() {
			return fmt.Errorf("fingerprint %s", fp)
		}
		return nil
	})
}

func mustHash(t *testing.T, key string) credential.KeyHash {
	t.Helper()
	h, err := credential.HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestWatchNamespaces runs a second controller, on an API server of its
// own, as the chart installs it with controller.watchNamespaces: as its
// ServiceAccount, with only the Roles the chart renders in those
// namespaces. It provisions there, reports a Conflict between two watched
// namespaces, and leaves other namespaces alone.
func TestWatchNamespaces(t *testing.T) {
	cfg := envtesttest.New(t, crdDir).Config
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	watched := []string{"team-a", "team-b"}
	saConfig, err := asChartServiceAccount(ctx, cfg, map[string]any{
		"controller": map[string]any{"watchNamespaces": []any{"team-a", "team-b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	url := pg.NewDatabase(t)
	if err := ledger.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	db, err := ledger.Open(ctx, url, ledger.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	mgr, err := newManager(saConfig, db, watched)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	admin, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	phaseOf := func(ns, name string) evalmeterv1alpha1.Phase {
		var ca evalmeterv1alpha1.ClientAgreement
		if err := admin.Get(ctx, objectKey(ns, name), &ca); err != nil {
			t.Fatal(err)
		}
		return ca.Status.Phase
	}
	waitPhase := func(ns, name string, want evalmeterv1alpha1.Phase) {
		t.Helper()
		polltest.Until(t, wait, ns+"/"+name+" phase "+string(want), func() error {
			if got := phaseOf(ns, name); got != want {
				return fmt.Errorf("phase %q", got)
			}
			return nil
		})
	}
	for _, ns := range []string{"team-a", "team-b", "elsewhere"} {
		if err := admin.Create(ctx, agreement(ns, "acme", "acme-"+ns, 2)); err != nil {
			t.Fatal(err)
		}
	}
	waitPhase("team-a", "acme", evalmeterv1alpha1.PhaseActive)
	waitPhase("team-b", "acme", evalmeterv1alpha1.PhaseActive)
	if err := admin.Create(ctx, agreement("team-b", "copy", "acme-team-a", 5)); err != nil {
		t.Fatal(err)
	}
	waitPhase("team-b", "copy", evalmeterv1alpha1.PhaseConflict)
	if c, err := db.Client(ctx, "acme-team-a"); err != nil || c.AllocatedHours != 2 {
		t.Errorf("the owner's allocation: %+v, %v; want 2", c, err)
	}
	if got := phaseOf("elsewhere", "acme"); got != "" {
		t.Errorf("an agreement outside the watched namespaces was reconciled: phase %q", got)
	}
	if _, err := db.Client(ctx, "acme-elsewhere"); err == nil {
		t.Error("an agreement outside the watched namespaces reached the ledger")
	}
}
