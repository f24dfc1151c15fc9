// Package controllers holds evalmeter's operator: the reconciler that turns
// ClientAgreements into API keys and credit allocations in the ledger.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

const (
	// Finalizer revokes the client's keys before the agreement goes.
	Finalizer = "evalmeter.io/revoke-keys"
	// APIKeySecretKey is the key of the API key in the agreement's Secret.
	APIKeySecretKey = "api-key"
	// clientIDField indexes agreements by spec.clientID in the cache.
	clientIDField = ".spec.clientID"
	// clientIDSelector selects agreements by spec.clientID on the API server
	// (a selectable field of the CRD).
	clientIDSelector = "spec.clientID"
)

// APIKeySecretName is the name of the Secret holding an agreement's key.
func APIKeySecretName(agreementName string) string { return agreementName + "-api-key" }

// ClientAgreementReconciler provisions ClientAgreements into the ledger,
// with the same calls as `evalmeter clients grant`.
type ClientAgreementReconciler struct {
	client.Client
	Ledger   *ledger.Store
	Recorder events.EventRecorder
	Now      func() time.Time
	Random   io.Reader // for API keys
	// Resync is how often an agreement's ledger figures are refreshed.
	Resync time.Duration

	// live reads the API server itself, not the cache (set up by SetupWithManager).
	live client.Reader
}

// +kubebuilder:rbac:groups=evalmeter.io,resources=clientagreements,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=evalmeter.io,resources=clientagreements/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=evalmeter.io,resources=clientagreements/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one agreement's Secret, ledger rows and status in line.
func (r *ClientAgreementReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ca evalmeterv1alpha1.ClientAgreement
	if err := r.Get(ctx, req.NamespacedName, &ca); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	owner, err := r.holdsClientID(ctx, &ca)
	if err != nil {
		return ctrl.Result{}, err
	}

	if !ca.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &ca, owner)
	}
	if controllerutil.AddFinalizer(&ca, Finalizer) {
		if err := r.Update(ctx, &ca); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := ca.Status.DeepCopy()
	ca.Status.ObservedGeneration = ca.Generation
	if !owner {
		ca.Status.Phase = evalmeterv1alpha1.PhaseConflict
		r.setReady(&ca, metav1.ConditionFalse, "Conflict",
			fmt.Sprintf("another ClientAgreement holds clientID %q; this one is not applied", ca.Spec.ClientID))
		return ctrl.Result{}, r.writeStatus(ctx, &ca, before)
	}

	result, err := r.provision(ctx, &ca, before)
	if statusErr := r.writeStatus(ctx, &ca, before); statusErr != nil && err == nil {
		err = statusErr
	}
	return result, err
}

// provision ensures the Secret, writes the ledger and fills the status.
func (r *ClientAgreementReconciler) provision(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement, before *evalmeterv1alpha1.ClientAgreementStatus) (ctrl.Result, error) {
	ca.Status.APIKeySecretName = APIKeySecretName(ca.Name)
	hash, err := r.ensureSecret(ctx, ca)
	if err != nil {
		var bad invalidKeyError
		if errors.As(err, &bad) {
			r.setReady(ca, metav1.ConditionFalse, "InvalidAPIKey", bad.Error())
			r.Recorder.Eventf(ca, nil, corev1.EventTypeWarning, "InvalidAPIKey", "Provision", bad.Error())
			return ctrl.Result{}, nil // waits for the Secret to change
		}
		return ctrl.Result{}, err
	}

	now := r.Now()
	grant := ledger.Grant{
		ClientID:       ca.Spec.ClientID,
		AllocatedHours: int(ca.Spec.AllocatedHours),
		Source:         "ClientAgreement " + ca.Namespace + "/" + ca.Name,
	}
	if ca.Spec.ValidUntil != nil {
		t := ca.Spec.ValidUntil.Time
		grant.ValidUntil = &t
	}
	created, err := r.Ledger.UpsertClient(ctx, grant, now)
	if err == nil {
		err = r.Ledger.SetKey(ctx, grant.ClientID, hash, now)
	}
	var usage ledger.Usage
	if err == nil {
		usage, err = r.Ledger.Usage(ctx, grant.ClientID, now)
	}
	if err != nil {
		if ca.Status.Phase == "" {
			ca.Status.Phase = evalmeterv1alpha1.PhasePending
		}
		r.setCondition(ca, evalmeterv1alpha1.ConditionLedgerReachable, metav1.ConditionFalse, "LedgerUnavailable", err.Error())
		r.setReady(ca, metav1.ConditionFalse, "LedgerUnavailable", "cannot reach the ledger (PostgreSQL); retrying")
		return ctrl.Result{}, fmt.Errorf("provisioning %s: %w", grant.ClientID, err)
	}
	r.setCondition(ca, evalmeterv1alpha1.ConditionLedgerReachable, metav1.ConditionTrue, "Reachable", "the ledger answered")

	ca.Status.ConsumedHours = int32(usage.ConsumedHours)
	ca.Status.RemainingHours = int32(usage.RemainingHours)
	ca.Status.ActiveSessions = int32(usage.ActiveSessions)
	fingerprint := hash.Fingerprint()
	switch {
	case created:
		r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Provisioned", "Provision",
			"client %s provisioned with %d hours, key %s", grant.ClientID, grant.AllocatedHours, fingerprint)
	case before.APIKeyFingerprint != "" && before.APIKeyFingerprint != fingerprint:
		r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Rotated", "Provision",
			"API key rotated: %s is active, %s revoked", fingerprint, before.APIKeyFingerprint)
	}
	ca.Status.APIKeyFingerprint = fingerprint

	expired := grant.ValidUntil != nil && !now.Before(*grant.ValidUntil)
	switch {
	case expired:
		ca.Status.Phase = evalmeterv1alpha1.PhaseExpired
		r.setReady(ca, metav1.ConditionFalse, "Expired", "the agreement ended at "+grant.ValidUntil.UTC().Format(time.RFC3339))
	case usage.RemainingHours == 0:
		ca.Status.Phase = evalmeterv1alpha1.PhaseExhausted
		r.setReady(ca, metav1.ConditionFalse, "CreditsExhausted", fmt.Sprintf("all %d allocated hours are consumed", usage.AllocatedHours))
	default:
		ca.Status.Phase = evalmeterv1alpha1.PhaseActive
		r.setReady(ca, metav1.ConditionTrue, "Provisioned", fmt.Sprintf("%d of %d hours remaining", usage.RemainingHours, usage.AllocatedHours))
	}
	if ca.Status.Phase != before.Phase {
		switch ca.Status.Phase {
		case evalmeterv1alpha1.PhaseExpired:
			r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Expired", "Provision", "the agreement ended; the API answers 403 to its key")
		case evalmeterv1alpha1.PhaseExhausted:
			r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Exhausted", "Provision", "every allocated hour is consumed")
		}
	}

	// Come back at validUntil to turn Expired, and periodically for figures.
	requeue := r.Resync
	if grant.ValidUntil != nil && !expired {
		requeue = min(requeue, grant.ValidUntil.Sub(now)+time.Second)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// invalidKeyError is a Secret whose api-key is not an evalmeter API key.
type invalidKeyError struct{ secret string }

func (e invalidKeyError) Error() string {
	return fmt.Sprintf("Secret %s: %q is not an evalmeter API key (evk_ and 43 base64url characters); the ledger keeps the previous key", e.secret, APIKeySecretKey)
}

// ensureSecret returns the hash of the agreement's API key, creating the
// Secret with a new key when it does not exist. A key put there by the
// operator is adopted; replacing it rotates the key.
func (r *ClientAgreementReconciler) ensureSecret(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement) (credential.KeyHash, error) {
	name := types.NamespacedName{Namespace: ca.Namespace, Name: APIKeySecretName(ca.Name)}
	var secret corev1.Secret
	err := r.Get(ctx, name, &secret)
	if apierrors.IsNotFound(err) {
		key, err := credential.NewAPIKey(r.Random)
		if err != nil {
			return credential.KeyHash{}, err
		}
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "evalmeter", "evalmeter.io/client-id": ca.Spec.ClientID}},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{APIKeySecretKey: key},
		}
		if err := controllerutil.SetControllerReference(ca, &secret, r.Scheme()); err != nil {
			return credential.KeyHash{}, err
		}
		if err := r.Create(ctx, &secret); err != nil {
			return credential.KeyHash{}, err
		}
		log.FromContext(ctx).Info("created the API key Secret", "secret", name.Name)
		return credential.HashAPIKey(key)
	}
	if err != nil {
		return credential.KeyHash{}, err
	}
	hash, err := credential.HashAPIKey(strings.TrimSpace(string(secret.Data[APIKeySecretKey])))
	if err != nil {
		return credential.KeyHash{}, invalidKeyError{secret: name.Name}
	}
	return hash, nil
}

// finalize revokes the client's keys and releases the agreement. Ledger
// rows stay, for audit.
func (r *ClientAgreementReconciler) finalize(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement, owner bool) error {
	if !controllerutil.ContainsFinalizer(ca, Finalizer) {
		return nil
	}
	if owner {
		if err := r.Ledger.RevokeKeys(ctx, ca.Spec.ClientID, r.Now()); err != nil {
			return fmt.Errorf("revoking the keys of %s: %w", ca.Spec.ClientID, err)
		}
		r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Revoked", "Delete", "the keys of client %s are revoked; its ledger rows are kept", ca.Spec.ClientID)
	}
	controllerutil.RemoveFinalizer(ca, Finalizer)
	return r.Update(ctx, ca)
}

// holdsClientID reports whether ca is the agreement that holds its
// clientID: the oldest of those naming it (then by namespace and name). It
// asks the API server, not the cache: an agreement created a moment ago and
// not yet in the cache must not let a younger one write the ledger too.
func (r *ClientAgreementReconciler) holdsClientID(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement) (bool, error) {
	var list evalmeterv1alpha1.ClientAgreementList
	if err := r.live.List(ctx, &list, client.MatchingFields{clientIDSelector: ca.Spec.ClientID}); err != nil {
		return false, err
	}
	if len(list.Items) == 0 { // deleted meanwhile
		return true, nil
	}
	return slices.MinFunc(list.Items, olderFirst).UID == ca.UID, nil
}

func olderFirst(a, b evalmeterv1alpha1.ClientAgreement) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
}

func (r *ClientAgreementReconciler) setReady(ca *evalmeterv1alpha1.ClientAgreement, status metav1.ConditionStatus, reason, message string) {
	r.setCondition(ca, evalmeterv1alpha1.ConditionReady, status, reason, message)
}

func (r *ClientAgreementReconciler) setCondition(ca *evalmeterv1alpha1.ClientAgreement, kind string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&ca.Status.Conditions, metav1.Condition{
		Type: kind, Status: status, Reason: reason, Message: message, ObservedGeneration: ca.Generation,
	})
}

// writeStatus writes the status when it changed.
func (r *ClientAgreementReconciler) writeStatus(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement, before *evalmeterv1alpha1.ClientAgreementStatus) error {
	if equality.Semantic.DeepEqual(*before, ca.Status) {
		return nil
	}
	return r.Status().Update(ctx, ca)
}

// SetupWithManager registers the reconciler: it watches agreements, their
// Secrets, and re-examines agreements sharing a clientID when one changes
// (a Conflict clears when the holder goes).
func (r *ClientAgreementReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.live = mgr.GetAPIReader()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &evalmeterv1alpha1.ClientAgreement{}, clientIDField,
		func(o client.Object) []string { return []string{o.(*evalmeterv1alpha1.ClientAgreement).Spec.ClientID} }); err != nil {
		return err
	}
	sameClientID := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
		var list evalmeterv1alpha1.ClientAgreementList
		if err := mgr.GetClient().List(ctx, &list, client.MatchingFields{clientIDField: o.(*evalmeterv1alpha1.ClientAgreement).Spec.ClientID}); err != nil {
			return nil
		}
		var reqs []ctrl.Request
		for _, other := range list.Items {
			if other.UID != o.GetUID() {
				reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&other)})
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&evalmeterv1alpha1.ClientAgreement{}).
		Owns(&corev1.Secret{}).
		Watches(&evalmeterv1alpha1.ClientAgreement{}, sameClientID).
		Named("clientagreement").
		Complete(r)
}
