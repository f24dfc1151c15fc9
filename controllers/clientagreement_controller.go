// Package controllers holds evalmeter's operator: the reconciler that turns
// ClientAgreements into API keys and credit allocations in the ledger.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	// LowCreditThreshold is the remaining hours at or below which an
	// agreement without spec.lowCreditThreshold reports LowCredit.
	LowCreditThreshold int32

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
		if apierrors.IsNotFound(err) {
			forgetAgreement(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ca.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &ca)
	}
	if controllerutil.AddFinalizer(&ca, Finalizer) {
		if err := r.Update(ctx, &ca); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := ca.Status.DeepCopy()
	ca.Status.ObservedGeneration = ca.Generation
	result, err := r.provision(ctx, &ca, before)
	if statusErr := r.writeStatus(ctx, &ca, before); statusErr != nil && err == nil {
		err = statusErr
		reconcileErrors.WithLabelValues(reasonKubernetes).Inc()
	}
	recordAgreement(&ca, lowCreditThreshold(&ca, r.LowCreditThreshold))
	return result, err
}

// provision takes the clientID in the ledger, ensures the Secret, sets the
// key and fills the status.
func (r *ClientAgreementReconciler) provision(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement, before *evalmeterv1alpha1.ClientAgreementStatus) (ctrl.Result, error) {
	now := r.Now()
	grant := ledger.Grant{
		ClientID:       ca.Spec.ClientID,
		AllocatedHours: int(ca.Spec.AllocatedHours),
		Source:         "ClientAgreement " + ca.Namespace + "/" + ca.Name,
		OrderReference: ca.Spec.OrderReference,
		Owner:          owner(ca),
	}
	threshold := int(lowCreditThreshold(ca, r.LowCreditThreshold))
	grant.LowCreditThreshold = &threshold
	if ca.Spec.ValidUntil != nil {
		t := ca.Spec.ValidUntil.Time
		grant.ValidUntil = &t
	}
	// PostgreSQL decides who owns the clientID, before any Secret is made:
	// the agreement that loses gets none.
	created, err := r.Ledger.UpsertClient(ctx, grant, now)
	var owned *ledger.OwnedError
	if errors.As(err, &owned) {
		stale, serr := r.staleOwner(ctx, owned.Owner)
		switch {
		case serr != nil:
			return ctrl.Result{}, serr
		case !stale:
			return r.conflict(ca, before, owned.Owner), nil
		}
		if err = r.Ledger.ReleaseStale(ctx, grant.ClientID, owned.Owner, now); err == nil {
			created, err = r.Ledger.UpsertClient(ctx, grant, now)
		}
		if errors.As(err, &owned) { // taken meanwhile by a third agreement
			return r.conflict(ca, before, owned.Owner), nil
		}
	}
	if err != nil {
		return r.ledgerUnavailable(ca, grant.ClientID, err)
	}

	ca.Status.APIKeySecretName = APIKeySecretName(ca.Name)
	hash, err := r.ensureSecret(ctx, ca)
	var bad invalidKeyError
	if errors.As(err, &bad) {
		return r.invalidKey(ca, now, bad.Error()), nil
	}
	if err != nil {
		reconcileErrors.WithLabelValues(reasonKubernetes).Inc()
		return ctrl.Result{}, err
	}
	revoked, err := r.Ledger.SetKey(ctx, grant.ClientID, hash, now, rotationGracePeriod(ca))
	if errors.Is(err, ledger.ErrInvalid) {
		return r.invalidKey(ca, now, fmt.Sprintf("Secret %s: %v; the ledger keeps the previous key", ca.Status.APIKeySecretName, err)), nil
	}
	var usage ledger.Usage
	if err == nil {
		usage, err = r.Ledger.Usage(ctx, grant.ClientID, now)
	}
	if err != nil {
		return r.ledgerUnavailable(ca, grant.ClientID, err)
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
			"API key rotated: %s is active; %s", fingerprint, replaced(before.APIKeyFingerprint, revoked))
	}
	ca.Status.APIKeyFingerprint = fingerprint
	r.trackRevocations(ca, fingerprint, revoked)
	nextRevocation := r.settleRevocations(ca, now)

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
	r.checkCredit(ca, usage)
	if ca.Status.Phase != before.Phase {
		switch ca.Status.Phase {
		case evalmeterv1alpha1.PhaseExpired:
			r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Expired", "Provision", "the agreement ended; the API answers 403 to its key")
		case evalmeterv1alpha1.PhaseExhausted:
			r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Exhausted", "Provision", "every allocated hour is consumed")
		}
	}

	// Come back at validUntil to turn Expired, at the end of a grace period
	// to report the revocation, and periodically for figures.
	result := requeueAt(ctrl.Result{RequeueAfter: r.Resync}, now, nextRevocation)
	if grant.ValidUntil != nil && !expired {
		result = requeueAt(result, now, *grant.ValidUntil)
	}
	return result, nil
}

// requeueAt is result, coming back by t (a second after) if that is sooner;
// a zero t changes nothing.
func requeueAt(result ctrl.Result, now, t time.Time) ctrl.Result {
	if t.IsZero() {
		return result
	}
	if d := t.Sub(now) + time.Second; result.RequeueAfter <= 0 || d < result.RequeueAfter {
		result.RequeueAfter = d
	}
	return result
}

// replaced says what became of the key a rotation replaced.
func replaced(fingerprint string, revoked []ledger.RevokedKey) string {
	for _, k := range revoked {
		if k.Fingerprint == fingerprint && !k.UsableUntil.IsZero() {
			return fmt.Sprintf("%s keeps working until %s, then is revoked", fingerprint, k.UsableUntil.UTC().Format(time.RFC3339))
		}
	}
	return fingerprint + " revoked"
}

// trackRevocations lists in the status the keys SetKey left in a grace
// period, with their deadline; a key whose grace period a rotation without
// one cut short leaves the list with a Revoked event.
func (r *ClientAgreementReconciler) trackRevocations(ca *evalmeterv1alpha1.ClientAgreement, active string, revoked []ledger.RevokedKey) {
	for _, k := range revoked {
		listed := slices.ContainsFunc(ca.Status.PreviousAPIKeys, func(p evalmeterv1alpha1.PreviousAPIKey) bool { return p.Fingerprint == k.Fingerprint })
		ca.Status.PreviousAPIKeys = slices.DeleteFunc(ca.Status.PreviousAPIKeys, func(p evalmeterv1alpha1.PreviousAPIKey) bool { return p.Fingerprint == k.Fingerprint })
		switch {
		case !k.UsableUntil.IsZero():
			ca.Status.PreviousAPIKeys = append(ca.Status.PreviousAPIKeys, evalmeterv1alpha1.PreviousAPIKey{Fingerprint: k.Fingerprint, RevokeAt: metav1.NewTime(k.UsableUntil)})
		case listed:
			r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Revoked", "Provision",
				"API key %s revoked at once by the rotation to %s, before the end of its grace period", k.Fingerprint, active)
		}
	}
}

// settleRevocations takes the keys whose grace period has ended off the
// status, with a Revoked event each (the ledger has refused them since
// their deadline, whether or not the controller ran then), and returns the
// next deadline, zero when none is left.
func (r *ClientAgreementReconciler) settleRevocations(ca *evalmeterv1alpha1.ClientAgreement, now time.Time) time.Time {
	var next time.Time
	ca.Status.PreviousAPIKeys = slices.DeleteFunc(ca.Status.PreviousAPIKeys, func(p evalmeterv1alpha1.PreviousAPIKey) bool {
		if p.RevokeAt.Time.After(now) {
			if next.IsZero() || p.RevokeAt.Time.Before(next) {
				next = p.RevokeAt.Time
			}
			return false
		}
		r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Revoked", "Provision",
			"API key %s revoked at the end of its grace period, %s", p.Fingerprint, p.RevokeAt.UTC().Format(time.RFC3339))
		return true
	})
	return next
}

// checkCredit sets the LowCredit condition from the ledger's figures and
// the threshold just written there, with a Warning event when it turns true.
func (r *ClientAgreementReconciler) checkCredit(ca *evalmeterv1alpha1.ClientAgreement, usage ledger.Usage) {
	wasLow := meta.IsStatusConditionTrue(ca.Status.Conditions, evalmeterv1alpha1.ConditionLowCredit)
	if !usage.LowCredit() {
		r.setCondition(ca, evalmeterv1alpha1.ConditionLowCredit, metav1.ConditionFalse, "AboveThreshold",
			fmt.Sprintf("%d hours remain, above the threshold of %d", usage.RemainingHours, *usage.LowCreditThreshold))
		return
	}
	msg := fmt.Sprintf("%d of %d hours remain, at or below the threshold of %d", usage.RemainingHours, usage.AllocatedHours, *usage.LowCreditThreshold)
	r.setCondition(ca, evalmeterv1alpha1.ConditionLowCredit, metav1.ConditionTrue, "AtOrBelowThreshold", msg)
	if !wasLow {
		r.Recorder.Eventf(ca, nil, corev1.EventTypeWarning, "LowCredit", "Provision", msg)
	}
}

func lowCreditThreshold(ca *evalmeterv1alpha1.ClientAgreement, def int32) int32 {
	if ca.Spec.LowCreditThreshold != nil {
		return *ca.Spec.LowCreditThreshold
	}
	return def
}

// rotationGracePeriod is how long a replaced key keeps working.
func rotationGracePeriod(ca *evalmeterv1alpha1.ClientAgreement) time.Duration {
	if ca.Spec.APIKey == nil || ca.Spec.APIKey.RotationGracePeriod == nil {
		return 0
	}
	return ca.Spec.APIKey.RotationGracePeriod.Duration
}

// owner is how the ledger names ca as the owner of its clientID.
func owner(ca *evalmeterv1alpha1.ClientAgreement) ledger.Owner {
	return ledger.Owner{UID: string(ca.UID), Name: ca.Namespace + "/" + ca.Name}
}

// staleOwner reports whether the agreement recorded as owning a clientID
// is gone (deleted, or deleted and re-created under its name), so that
// another may take the clientID. An agreement this controller may not read
// (outside its namespaces) is taken to exist: two controllers never both
// write one client.
func (r *ClientAgreementReconciler) staleOwner(ctx context.Context, h ledger.Owner) (bool, error) {
	ns, name, ok := strings.Cut(h.Name, "/")
	if !ok {
		return false, nil
	}
	var other evalmeterv1alpha1.ClientAgreement
	err := r.live.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &other)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return string(other.UID) != h.UID, nil
}

// conflict reports that another agreement owns ca's clientID. It comes
// back after a resync: an owner outside this controller's namespaces sends
// no event when it goes.
func (r *ClientAgreementReconciler) conflict(ca *evalmeterv1alpha1.ClientAgreement, before *evalmeterv1alpha1.ClientAgreementStatus, h ledger.Owner) ctrl.Result {
	msg := fmt.Sprintf("ClientAgreement %s holds clientID %q; this one is not applied until it is deleted", h.Name, ca.Spec.ClientID)
	ca.Status.Phase = evalmeterv1alpha1.PhaseConflict
	r.setReady(ca, metav1.ConditionFalse, "Conflict", msg)
	if before.Phase != evalmeterv1alpha1.PhaseConflict {
		r.Recorder.Eventf(ca, nil, corev1.EventTypeWarning, "Conflict", "Provision", msg)
	}
	reconcileErrors.WithLabelValues(reasonConflict).Inc()
	return ctrl.Result{RequeueAfter: r.Resync}
}

// invalidKey reports a Secret whose key the ledger cannot take; it waits
// for the Secret to change.
func (r *ClientAgreementReconciler) invalidKey(ca *evalmeterv1alpha1.ClientAgreement, now time.Time, msg string) ctrl.Result {
	r.setReady(ca, metav1.ConditionFalse, "InvalidAPIKey", msg)
	r.Recorder.Eventf(ca, nil, corev1.EventTypeWarning, "InvalidAPIKey", "Provision", msg)
	reconcileErrors.WithLabelValues(reasonInvalidAPIKey).Inc()
	// A Secret change brings the agreement back; grace periods still end.
	return requeueAt(ctrl.Result{}, now, r.settleRevocations(ca, now))
}

func (r *ClientAgreementReconciler) ledgerUnavailable(ca *evalmeterv1alpha1.ClientAgreement, clientID string, err error) (ctrl.Result, error) {
	if ca.Status.Phase == "" {
		ca.Status.Phase = evalmeterv1alpha1.PhasePending
	}
	r.setCondition(ca, evalmeterv1alpha1.ConditionLedgerReachable, metav1.ConditionFalse, "LedgerUnavailable", err.Error())
	r.setReady(ca, metav1.ConditionFalse, "LedgerUnavailable", "cannot reach the ledger (PostgreSQL); retrying")
	reconcileErrors.WithLabelValues(reasonLedgerUnavailable).Inc()
	return ctrl.Result{}, fmt.Errorf("provisioning %s: %w", clientID, err)
}

// invalidKeyError is a Secret whose api-key is not an evalmeter API key.
type invalidKeyError struct{ secret string }

func (e invalidKeyError) Error() string {
	return fmt.Sprintf("Secret %s: %q is not an evalmeter API key (evk_ and 43 base64url characters); the ledger keeps the previous key", e.secret, APIKeySecretKey)
}

// Labels of the Secrets the controller manages. Its cache holds only
// Secrets with managedByLabel, however many others the cluster has.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "evalmeter"
	agreementLabel = "evalmeter.io/agreement"
	clientIDLabel  = "evalmeter.io/client-id"
)

// ensureSecret returns the hash of the agreement's API key, creating the
// Secret with a new key when it does not exist. A Secret put there by the
// operator is adopted (labelled, so that the cache sees it, but not owned:
// deleting the agreement leaves it); replacing its key rotates the key.
func (r *ClientAgreementReconciler) ensureSecret(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement) (credential.KeyHash, error) {
	name := types.NamespacedName{Namespace: ca.Namespace, Name: APIKeySecretName(ca.Name)}
	labels := map[string]string{managedByLabel: managedBy, agreementLabel: ca.Name, clientIDLabel: ca.Spec.ClientID}
	var secret corev1.Secret
	err := r.Get(ctx, name, &secret)
	if apierrors.IsNotFound(err) { // not in the cache: perhaps not labelled yet
		err = r.live.Get(ctx, name, &secret)
	}
	if apierrors.IsNotFound(err) {
		key, err := credential.NewAPIKey(r.Random)
		if err != nil {
			return credential.KeyHash{}, err
		}
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name, Labels: labels},
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
	if !hasLabels(secret.Labels, labels) {
		patch := client.MergeFrom(secret.DeepCopy())
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		maps.Copy(secret.Labels, labels)
		if err := r.Patch(ctx, &secret, patch); err != nil {
			return credential.KeyHash{}, err
		}
		log.FromContext(ctx).Info("adopted the API key Secret", "secret", name.Name)
	}
	hash, err := credential.HashAPIKey(strings.TrimSpace(string(secret.Data[APIKeySecretKey])))
	if err != nil {
		return credential.KeyHash{}, invalidKeyError{secret: name.Name}
	}
	return hash, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// CacheOptions is the manager's cache: the namespaces to watch (all when
// empty) and, of Secrets, only those the controller manages.
func CacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{managedByLabel: managedBy})},
	}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// finalize releases the clientID: when this agreement owns it, the
// client's keys are revoked and its open sessions end. Ledger rows stay,
// for audit.
func (r *ClientAgreementReconciler) finalize(ctx context.Context, ca *evalmeterv1alpha1.ClientAgreement) error {
	if !controllerutil.ContainsFinalizer(ca, Finalizer) {
		return nil
	}
	owned, err := r.Ledger.Release(ctx, ca.Spec.ClientID, owner(ca), r.Now())
	if err != nil {
		return fmt.Errorf("releasing client %s: %w", ca.Spec.ClientID, err)
	}
	if owned {
		r.Recorder.Eventf(ca, nil, corev1.EventTypeNormal, "Revoked", "Delete",
			"the keys of client %s are revoked and its sessions ended; its ledger rows are kept", ca.Spec.ClientID)
	}
	controllerutil.RemoveFinalizer(ca, Finalizer)
	forgetAgreement(ca.Namespace, ca.Name)
	return r.Update(ctx, ca)
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
// (a Conflict clears when the owner goes).
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
	// An adopted Secret has no owner reference: it is mapped by its label.
	secretAgreement := func(ctx context.Context, o client.Object) []ctrl.Request {
		name, ok := o.GetLabels()[agreementLabel]
		if !ok {
			return nil
		}
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&evalmeterv1alpha1.ClientAgreement{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(secretAgreement)).
		Watches(&evalmeterv1alpha1.ClientAgreement{}, sameClientID).
		Named("clientagreement").
		Complete(r)
}
