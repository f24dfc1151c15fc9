package controllers_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
	"github.com/evalmeter/evalmeter/controllers"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

const wait = 20 * time.Second

func agreement(ns, name, clientID string, hours int32) *evalmeterv1alpha1.ClientAgreement {
	return &evalmeterv1alpha1.ClientAgreement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       evalmeterv1alpha1.ClientAgreementSpec{ClientID: clientID, AllocatedHours: hours, OrderReference: "PO-test"},
	}
}

func get(t *testing.T, ns, name string) *evalmeterv1alpha1.ClientAgreement {
	t.Helper()
	var ca evalmeterv1alpha1.ClientAgreement
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ca); err != nil {
		t.Fatal(err)
	}
	return &ca
}

// apiKey reads the key from the agreement's Secret.
func apiKey(ns, name string) (string, error) {
	var s corev1.Secret
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: controllers.APIKeySecretName(name)}, &s); err != nil {
		return "", err
	}
	return string(s.Data[controllers.APIKeySecretKey]), nil
}

// setAPIKey writes key into the API key Secret of the agreement ns/name, as
// an operator rotating it would.
func setAPIKey(t *testing.T, ns, name, key string) {
	t.Helper()
	ctx := context.Background()
	var secret corev1.Secret
	if err := k8sClient.Get(ctx, objectKey(ns, controllers.APIKeySecretName(name)), &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{controllers.APIKeySecretKey: []byte(key)}
	if err := k8sClient.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
}

// phase waits for an agreement's phase, with its status for the given generation.
func phase(t *testing.T, ns, name string, want evalmeterv1alpha1.Phase) *evalmeterv1alpha1.ClientAgreement {
	t.Helper()
	var ca *evalmeterv1alpha1.ClientAgreement
	polltest.Until(t, wait, fmt.Sprintf("%s/%s phase %s", ns, name, want), func() error {
		ca = get(t, ns, name)
		if ca.Status.Phase != want || ca.Status.ObservedGeneration != ca.Generation {
			return fmt.Errorf("phase %q at generation %d of %d", ca.Status.Phase, ca.Status.ObservedGeneration, ca.Generation)
		}
		return nil
	})
	return ca
}

func TestProvision(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, agreement(ns, "acme", "acme-provision", 5)); err != nil {
		t.Fatal(err)
	}
	ca := phase(t, ns, "acme", evalmeterv1alpha1.PhaseActive)

	key, err := apiKey(ns, "acme")
	if err != nil {
		t.Fatal(err)
	}
	hash, err := credential.HashAPIKey(key)
	if err != nil {
		t.Fatalf("the Secret holds no valid key: %v", err)
	}
	client, err := store.ClientByKey(ctx, hash, time.Now())
	if err != nil || client.ID != "acme-provision" || client.AllocatedHours != 5 {
		t.Errorf("ledger: %+v, %v", client, err)
	}
	ready := meta.FindStatusCondition(ca.Status.Conditions, evalmeterv1alpha1.ConditionReady)
	s := ca.Status
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != ca.Generation ||
		s.ConsumedHours != 0 || s.RemainingHours != 5 || s.APIKeyFingerprint != hash.Fingerprint() ||
		s.APIKeySecretName != "acme-api-key" || !strings.Contains(ca.Finalizers[0], "evalmeter.io") {
		t.Errorf("status %+v, finalizers %v", s, ca.Finalizers)
	}
	if strings.Contains(fmt.Sprint(ca.Status), key) {
		t.Error("the status reveals the key")
	}
	if status := usageStatus(t, key); status != http.StatusOK {
		t.Errorf("GET /usage with the Secret's key: %d", status)
	}
	event(t, ns, "acme", "Provisioned")
	var orders []string
	if err := store.Events(ctx, "acme-provision", time.Time{}, func(e ledger.Event) error {
		orders = append(orders, e.Kind+" "+e.Source+" "+e.OrderReference)
		return nil
	}); err != nil || len(orders) != 1 || orders[0] != "allocation ClientAgreement "+ns+"/acme PO-test" {
		t.Errorf("credit events %q, %v; want the allocation with the agreement and its order reference", orders, err)
	}
	var secret corev1.Secret
	if err := k8sClient.Get(ctx, objectKey(ns, "acme-api-key"), &secret); err != nil {
		t.Fatal(err)
	}
	if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].Name != "acme" || secret.OwnerReferences[0].Controller == nil {
		t.Errorf("the Secret is not owned by its agreement: %+v", secret.OwnerReferences)
	}

	// Sessions consumed in the ledger show in the status at the next resync.
	now := time.Now().UTC().Truncate(time.Microsecond)
	id, _ := credential.NewSessionID(rand.Reader)
	if _, _, err := store.OpenSession(ctx, "test-session-0000001", ledger.Session{ID: id, ClientID: "acme-provision", IssuedAt: now, ExpiresAt: now.Add(time.Hour), TokenKeyID: "k"}, "test"); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, wait, "consumption in the status", func() error {
		s := get(t, ns, "acme").Status
		if s.ConsumedHours != 1 || s.RemainingHours != 4 || s.ActiveSessions != 1 {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})

	// Raising the allocation grows what remains.
	ca = get(t, ns, "acme")
	ca.Spec.AllocatedHours = 8
	if err := k8sClient.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, wait, "raised allocation", func() error {
		s := get(t, ns, "acme").Status
		if s.RemainingHours != 7 {
			return fmt.Errorf("remaining %d", s.RemainingHours)
		}
		return nil
	})
	if c, _ := store.Client(ctx, "acme-provision"); c.AllocatedHours != 8 {
		t.Errorf("ledger allocation %d, want 8", c.AllocatedHours)
	}

	// Lowering it to what is consumed exhausts the agreement.
	ca = get(t, ns, "acme")
	ca.Spec.AllocatedHours = 1
	if err := k8sClient.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "acme", evalmeterv1alpha1.PhaseExhausted)
}

func objectKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func withGrace(ca *evalmeterv1alpha1.ClientAgreement, grace time.Duration) *evalmeterv1alpha1.ClientAgreement {
	ca.Spec.APIKey = &evalmeterv1alpha1.APIKeySpec{RotationGracePeriod: &metav1.Duration{Duration: grace}}
	return ca
}

// TestRotationGracePeriod: the replaced key and its sessions keep working
// until the deadline shown in the status, then are refused; events say
// Rotated, then Revoked.
func TestRotationGracePeriod(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	const grace = 6 * time.Second
	if err := k8sClient.Create(ctx, withGrace(agreement(ns, "grace", "acme-grace", 5), grace)); err != nil {
		t.Fatal(err)
	}
	oldFingerprint := phase(t, ns, "grace", evalmeterv1alpha1.PhaseActive).Status.APIKeyFingerprint
	oldKey, _ := apiKey(ns, "grace")
	oldSession := openSession(t, oldKey)

	newKey, _ := credential.NewAPIKey(rand.Reader)
	newHash, _ := credential.HashAPIKey(newKey)
	rotated := time.Now()
	setAPIKey(t, ns, "grace", newKey)
	var prev evalmeterv1alpha1.PreviousAPIKey
	polltest.Until(t, wait, "the rotation in the status", func() error {
		ca := get(t, ns, "grace")
		if keys := ca.Status.PreviousAPIKeys; ca.Status.APIKeyFingerprint != newHash.Fingerprint() || len(keys) != 1 {
			return fmt.Errorf("fingerprint %s, previous keys %+v", ca.Status.APIKeyFingerprint, keys)
		}
		prev = get(t, ns, "grace").Status.PreviousAPIKeys[0]
		return nil
	})
	if prev.Fingerprint != oldFingerprint || prev.RevokeAt.Time.Before(rotated.Add(grace-time.Second)) || prev.RevokeAt.Time.After(time.Now().Add(grace+time.Second)) {
		t.Errorf("status.previousAPIKey %+v: want %s revoked %s after the rotation", prev, oldFingerprint, grace)
	}
	if note := event(t, ns, "grace", "Rotated"); !strings.Contains(note, oldFingerprint+" keeps working until") {
		t.Errorf("Rotated event %q does not say until when the old key works", note)
	}
	if time.Until(prev.RevokeAt.Time) < time.Second {
		t.Fatal("the grace period ended before the old key could be checked; the machine is too slow for this test")
	}
	if old, now := usageStatus(t, oldKey), usageStatus(t, newKey); old != http.StatusOK || now != http.StatusOK {
		t.Errorf("in the grace period: old key %d, new key %d, want both 200", old, now)
	}
	if status := postMetricsStatus(t, oldSession); status != http.StatusOK {
		t.Errorf("the old key's session in the grace period: %d, want 200", status)
	}

	time.Sleep(time.Until(prev.RevokeAt.Time))
	if old, now := usageStatus(t, oldKey), usageStatus(t, newKey); old != http.StatusUnauthorized || now != http.StatusOK {
		t.Errorf("after the grace period: old key %d (want 401), new key %d (want 200)", old, now)
	}
	if status := postMetricsStatus(t, oldSession); status != http.StatusUnauthorized {
		t.Errorf("the old key's session after the grace period: %d, want 401", status)
	}
	if note := event(t, ns, "grace", "Revoked"); !strings.Contains(note, oldFingerprint) {
		t.Errorf("Revoked event %q does not name the old key", note)
	}
	polltest.Until(t, wait, "status.previousAPIKeys cleared", func() error {
		if p := get(t, ns, "grace").Status.PreviousAPIKeys; len(p) != 0 {
			return fmt.Errorf("previousAPIKeys %+v", p)
		}
		return nil
	})
}

// TestRotationCutsGracePeriod: a rotation without a grace period, during
// another's, revokes both old keys at once, with events saying so.
func TestRotationCutsGracePeriod(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, withGrace(agreement(ns, "cut", "acme-cut", 5), time.Hour)); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "cut", evalmeterv1alpha1.PhaseActive)
	first, _ := apiKey(ns, "cut")
	rotate := func() (string, string) {
		t.Helper()
		key, _ := credential.NewAPIKey(rand.Reader)
		hash, _ := credential.HashAPIKey(key)
		setAPIKey(t, ns, "cut", key)
		polltest.Until(t, wait, "the rotation in the status", func() error {
			if fp := get(t, ns, "cut").Status.APIKeyFingerprint; fp != hash.Fingerprint() {
				return fmt.Errorf("fingerprint %s", fp)
			}
			return nil
		})
		return key, hash.Fingerprint()
	}
	second, _ := rotate()
	if keys := get(t, ns, "cut").Status.PreviousAPIKeys; len(keys) != 1 || time.Until(keys[0].RevokeAt.Time) < 59*time.Minute {
		t.Fatalf("previousAPIKeys %+v: want the first key, revoked in an hour", keys)
	}

	ca := get(t, ns, "cut")
	ca.Spec.APIKey = nil // no grace period
	if err := k8sClient.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	// Rotated only once the controller has seen the change: a rotation it
	// reconciles under the old spec rightly gets the old grace period.
	phase(t, ns, "cut", evalmeterv1alpha1.PhaseActive)
	third, _ := rotate()
	if keys := get(t, ns, "cut").Status.PreviousAPIKeys; len(keys) != 0 {
		t.Errorf("previousAPIKeys %+v after a rotation without grace, want none", keys)
	}
	for name, want := range map[string]int{first: http.StatusUnauthorized, second: http.StatusUnauthorized, third: http.StatusOK} {
		if got := usageStatus(t, name); got != want {
			t.Errorf("usage with key %.12s...: %d, want %d", name, got, want)
		}
	}
	if note := event(t, ns, "cut", "Revoked"); !strings.Contains(note, "revoked at once by the rotation") {
		t.Errorf("Revoked event %q does not say the grace period was cut", note)
	}
}

func TestExpiry(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	ca := agreement(ns, "shortlived", "acme-expiry", 3)
	ca.Spec.ValidUntil = &metav1.Time{Time: time.Now().Add(3 * time.Second)}
	if err := k8sClient.Create(ctx, ca); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "shortlived", evalmeterv1alpha1.PhaseActive)
	key, _ := apiKey(ns, "shortlived")
	hash, _ := credential.HashAPIKey(key)
	// The controller comes back at validUntil on its own (the resync is 2 s;
	// the point is that the phase turns within seconds of the end).
	ca = phase(t, ns, "shortlived", evalmeterv1alpha1.PhaseExpired)
	if r := meta.FindStatusCondition(ca.Status.Conditions, evalmeterv1alpha1.ConditionReady); r == nil || r.Reason != "Expired" {
		t.Errorf("Ready condition %+v", r)
	}
	if status := usageStatus(t, key); status != http.StatusForbidden {
		t.Errorf("GET /usage after validUntil: %d, want 403", status)
	}
	if _, err := store.ClientByKey(ctx, hash, time.Now()); err != nil {
		t.Errorf("the key of an expired agreement must still be known (403, not 401): %v", err)
	}
	event(t, ns, "shortlived", "Expired")
}

func TestRotation(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, agreement(ns, "rot", "acme-rotation", 2)); err != nil {
		t.Fatal(err)
	}
	before := phase(t, ns, "rot", evalmeterv1alpha1.PhaseActive).Status.APIKeyFingerprint
	oldKey, _ := apiKey(ns, "rot")
	oldHash, _ := credential.HashAPIKey(oldKey)

	newKey, _ := credential.NewAPIKey(rand.Reader)
	newHash, _ := credential.HashAPIKey(newKey)
	setAPIKey(t, ns, "rot", newKey)
	polltest.Until(t, wait, "rotation", func() error {
		if _, err := store.ClientByKey(ctx, newHash, time.Now()); err != nil {
			return fmt.Errorf("new key: %v", err)
		}
		if _, err := store.ClientByKey(ctx, oldHash, time.Now()); !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("old key still active: %v", err)
		}
		if fp := get(t, ns, "rot").Status.APIKeyFingerprint; fp != newHash.Fingerprint() || fp == before {
			return fmt.Errorf("fingerprint %s", fp)
		}
		return nil
	})
	if old, now := usageStatus(t, oldKey), usageStatus(t, newKey); old != http.StatusUnauthorized || now != http.StatusOK {
		t.Errorf("after rotation: old key %d (want 401), new key %d (want 200)", old, now)
	}
	event(t, ns, "rot", "Rotated")

	// Putting the revoked key back does not reinstate it.
	setAPIKey(t, ns, "rot", oldKey)
	waitReady(t, ns, "rot", "InvalidAPIKey", "revoked")
	if old, now := usageStatus(t, oldKey), usageStatus(t, newKey); old != http.StatusUnauthorized || now != http.StatusOK {
		t.Errorf("after the revoked key was put back: old key %d (want 401), new key %d (want 200)", old, now)
	}

	// A Secret that holds no valid key changes nothing in the ledger.
	setAPIKey(t, ns, "rot", "not-a-key")
	waitReady(t, ns, "rot", "InvalidAPIKey", "not an evalmeter API key")
	if _, err := store.ClientByKey(ctx, newHash, time.Now()); err != nil {
		t.Errorf("the last valid key was revoked by an invalid Secret: %v", err)
	}
}

func TestDelete(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, agreement(ns, "gone", "acme-delete", 2)); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "gone", evalmeterv1alpha1.PhaseActive)
	key, _ := apiKey(ns, "gone")
	if status := usageStatus(t, key); status != http.StatusOK {
		t.Fatalf("GET /usage before the delete: %d", status)
	}
	token := openSession(t, key)
	if status := postMetricsStatus(t, token); status != http.StatusOK {
		t.Fatalf("POST /metrics before the delete: %d", status)
	}
	if err := k8sClient.Delete(ctx, get(t, ns, "gone")); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, wait, "agreement gone", func() error {
		var ca evalmeterv1alpha1.ClientAgreement
		if err := k8sClient.Get(ctx, objectKey(ns, "gone"), &ca); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (finalizers %v): %v", ca.Finalizers, err)
		}
		return nil
	})
	if status := usageStatus(t, key); status != http.StatusUnauthorized {
		t.Errorf("GET /usage after the delete: %d, want 401", status)
	}
	if status := postMetricsStatus(t, token); status != http.StatusUnauthorized {
		t.Errorf("POST /metrics with a session opened before the delete: %d, want 401", status)
	}
	if c, err := store.Client(ctx, "acme-delete"); err != nil || c.AllocatedHours != 2 {
		t.Errorf("the ledger rows must stay: %+v, %v", c, err)
	}
}

func TestConflict(t *testing.T) {
	first, second := namespace(t), namespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, agreement(first, "a", "acme-conflict", 2)); err != nil {
		t.Fatal(err)
	}
	phase(t, first, "a", evalmeterv1alpha1.PhaseActive)
	// No pause: the holder is whoever wrote PostgreSQL first, whatever the
	// creation timestamps (one-second resolution) or the names say.
	if err := k8sClient.Create(ctx, agreement(second, "b", "acme-conflict", 9)); err != nil {
		t.Fatal(err)
	}
	ca := phase(t, second, "b", evalmeterv1alpha1.PhaseConflict)
	if r := meta.FindStatusCondition(ca.Status.Conditions, evalmeterv1alpha1.ConditionReady); r == nil || r.Reason != "Conflict" {
		t.Errorf("Ready %+v", r)
	}
	if c, _ := store.Client(ctx, "acme-conflict"); c.AllocatedHours != 2 {
		t.Errorf("the later agreement was applied: allocation %d", c.AllocatedHours)
	}
	if _, err := apiKey(second, "b"); !apierrors.IsNotFound(err) {
		t.Errorf("the later agreement got a Secret: %v", err)
	}

	// When the holder goes, the other takes the clientID over.
	if err := k8sClient.Delete(ctx, get(t, first, "a")); err != nil {
		t.Fatal(err)
	}
	phase(t, second, "b", evalmeterv1alpha1.PhaseActive)
	if c, _ := store.Client(ctx, "acme-conflict"); c.AllocatedHours != 9 {
		t.Errorf("allocation %d after the takeover, want 9", c.AllocatedHours)
	}
}

// TestValidation: the API server itself refuses invalid agreements.
func TestValidation(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	for _, bad := range []*evalmeterv1alpha1.ClientAgreement{
		agreement(ns, "upper", "Acme", 1),
		agreement(ns, "dash", "-acme", 1),
		agreement(ns, "long", strings.Repeat("a", 64), 1),
		agreement(ns, "negative", "acme-negative", -1),
		withGrace(agreement(ns, "grace-negative", "acme-grace", 1), -time.Second),
		withGrace(agreement(ns, "grace-long", "acme-grace", 1), 721*time.Hour),
	} {
		if err := k8sClient.Create(ctx, bad); !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid", bad.Name, err)
		}
	}
	ok := agreement(ns, "ok", "acme-validation", 1)
	if err := k8sClient.Create(ctx, ok); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "ok", evalmeterv1alpha1.PhaseActive) // the finalizer is in
	ok = get(t, ns, "ok")
	ok.Spec.ClientID = "acme-other"
	err := k8sClient.Update(ctx, ok)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "clientID is immutable") {
		t.Errorf("changing clientID: %v, want the CEL rule's refusal", err)
	}
}

// TestLedgerDown: with PostgreSQL stopped the agreement reports it and the
// reconciler retries; once it is back the agreement is provisioned.
func TestLedgerDown(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			pg.Restart()
		}
	}()
	if err := k8sClient.Create(ctx, agreement(ns, "wait", "acme-ledger-down", 3)); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, wait, "LedgerReachable=False", func() error {
		ca := get(t, ns, "wait")
		c := meta.FindStatusCondition(ca.Status.Conditions, evalmeterv1alpha1.ConditionLedgerReachable)
		if c == nil || c.Status != metav1.ConditionFalse || ca.Status.Phase != evalmeterv1alpha1.PhasePending {
			return fmt.Errorf("phase %q, condition %+v", ca.Status.Phase, c)
		}
		return nil
	})
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	ca := phase(t, ns, "wait", evalmeterv1alpha1.PhaseActive)
	if c := meta.FindStatusCondition(ca.Status.Conditions, evalmeterv1alpha1.ConditionLedgerReachable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("LedgerReachable %+v after recovery", c)
	}
}
