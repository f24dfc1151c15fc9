package controllers

import (
	"maps"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
)

// The controller's metrics, served on its metrics endpoint beside
// controller-runtime's own. One series per agreement: bounded by the
// number of agreements, never by sessions.
var (
	agreementLabels = []string{"namespace", "name", "client_id"}

	agreementHours = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evalmeter_agreement_hours",
		Help: "Evaluation-hour credits of a ClientAgreement, by kind: allocated, consumed or remaining.",
	}, append(agreementLabels, "kind"))
	agreementActiveSessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evalmeter_agreement_active_sessions",
		Help: "Sessions of a ClientAgreement's client whose window is open.",
	}, agreementLabels)
	agreementPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evalmeter_agreement_phase",
		Help: "1 for a ClientAgreement's current phase, 0 for the others.",
	}, append(agreementLabels, "phase"))
	// A timestamp, not a countdown, so that it is never stale between
	// reconciles: seconds left are this minus time().
	agreementValidUntil = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evalmeter_agreement_valid_until_timestamp_seconds",
		Help: "End of a ClientAgreement (spec.validUntil), in Unix seconds; absent when it has none.",
	}, agreementLabels)
	agreementThreshold = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evalmeter_agreement_low_credit_threshold_hours",
		Help: "Remaining hours at or below which a ClientAgreement reports LowCredit.",
	}, agreementLabels)
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evalmeter_reconcile_errors_total",
		Help: "ClientAgreement reconciles that did not provision, by reason.",
	}, []string{"reason"})
)

// Reasons of evalmeter_reconcile_errors_total.
const (
	reasonLedgerUnavailable = "ledger_unavailable"
	reasonInvalidAPIKey     = "invalid_api_key"
	reasonConflict          = "conflict"
	reasonKubernetes        = "kubernetes_api"
)

var phases = []evalmeterv1alpha1.Phase{
	evalmeterv1alpha1.PhasePending, evalmeterv1alpha1.PhaseActive, evalmeterv1alpha1.PhaseExhausted,
	evalmeterv1alpha1.PhaseExpired, evalmeterv1alpha1.PhaseConflict,
}

func init() {
	ctrlmetrics.Registry.MustRegister(agreementHours, agreementActiveSessions, agreementPhase, agreementValidUntil, agreementThreshold, reconcileErrors)
	for _, r := range []string{reasonLedgerUnavailable, reasonInvalidAPIKey, reasonConflict, reasonKubernetes} {
		reconcileErrors.WithLabelValues(r) // present at 0, so rate() sees the first error
	}
}

// recordAgreement publishes an agreement's figures from its status.
func recordAgreement(ca *evalmeterv1alpha1.ClientAgreement, threshold int32) {
	l := prometheus.Labels{"namespace": ca.Namespace, "name": ca.Name, "client_id": ca.Spec.ClientID}
	for _, p := range phases {
		v := 0.0
		if ca.Status.Phase == p {
			v = 1
		}
		agreementPhase.With(with(l, "phase", string(p))).Set(v)
	}
	if ca.Status.Phase == evalmeterv1alpha1.PhaseConflict || ca.Status.Phase == evalmeterv1alpha1.PhasePending {
		return // its figures are not its own, or not known
	}
	agreementHours.With(with(l, "kind", "allocated")).Set(float64(ca.Spec.AllocatedHours))
	agreementHours.With(with(l, "kind", "consumed")).Set(float64(ca.Status.ConsumedHours))
	agreementHours.With(with(l, "kind", "remaining")).Set(float64(ca.Status.RemainingHours))
	agreementActiveSessions.With(l).Set(float64(ca.Status.ActiveSessions))
	agreementThreshold.With(l).Set(float64(threshold))
	if ca.Spec.ValidUntil != nil {
		agreementValidUntil.With(l).Set(float64(ca.Spec.ValidUntil.Unix()))
	} else {
		agreementValidUntil.Delete(l)
	}
}

// forgetAgreement removes an agreement's series once it is gone.
func forgetAgreement(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	agreementHours.DeletePartialMatch(l)
	agreementActiveSessions.DeletePartialMatch(l)
	agreementPhase.DeletePartialMatch(l)
	agreementValidUntil.DeletePartialMatch(l)
	agreementThreshold.DeletePartialMatch(l)
}

func with(l prometheus.Labels, k, v string) prometheus.Labels {
	out := prometheus.Labels{k: v}
	maps.Copy(out, l)
	return out
}
