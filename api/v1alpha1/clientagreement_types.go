package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClientAgreementSpec is a client's agreement as the operator writes it from
// the written order(s).
type ClientAgreementSpec struct {
	// clientID names the client in the ledger and in its usage. It cannot
	// change: the ledger's consumption belongs to it.
	// +required
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clientID is immutable"
	ClientID string `json:"clientID"`

	// allocatedHours is the evaluation-hour credits allocated under the
	// written order(s), in all. Each session consumes one. Lowering it below
	// what is consumed leaves nothing remaining, never a negative balance.
	// +required
	// +kubebuilder:validation:Minimum=0
	AllocatedHours int32 `json:"allocatedHours"`

	// validUntil ends the agreement: from then on the API answers 403 to the
	// client's key. Absent, the agreement does not end.
	// +optional
	ValidUntil *metav1.Time `json:"validUntil,omitempty"`

	// orderReference is free text naming the written order, for people.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	OrderReference string `json:"orderReference,omitempty"`

	// lowCreditThreshold is the remaining hours at or below which the
	// agreement reports LowCredit, with a Warning event and the metric that
	// drives the chart's alert. Absent, the controller's default applies
	// (--low-credit-threshold).
	// +optional
	// +kubebuilder:validation:Minimum=0
	LowCreditThreshold *int32 `json:"lowCreditThreshold,omitempty"`

	// apiKey says how the client's API key is rotated.
	// +optional
	APIKey *APIKeySpec `json:"apiKey,omitempty"`
}

// APIKeySpec says how the client's API key is rotated.
type APIKeySpec struct {
	// rotationGracePeriod is how long the previous key keeps working after
	// the Secret's key is replaced, so that the client can switch without
	// an outage; then it is revoked and the sessions it opened end. 0 (the
	// default) revokes it at once. At most 720h.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="rotationGracePeriod must be between 0s and 720h"
	RotationGracePeriod *metav1.Duration `json:"rotationGracePeriod,omitempty"`
}

// Phase is the state of an agreement at a glance.
// +kubebuilder:validation:Enum=Pending;Active;Expired;Exhausted;Conflict
type Phase string

const (
	// PhasePending: not yet provisioned, for example while PostgreSQL is
	// unreachable.
	PhasePending Phase = "Pending"
	// PhaseActive: the client can open sessions.
	PhaseActive Phase = "Active"
	// PhaseExpired: validUntil has passed.
	PhaseExpired Phase = "Expired"
	// PhaseExhausted: every allocated credit is consumed.
	PhaseExhausted Phase = "Exhausted"
	// PhaseConflict: another agreement holds the same clientID; this one is
	// not applied.
	PhaseConflict Phase = "Conflict"
)

// Condition types of a ClientAgreement.
const (
	// ConditionReady is true when the key and the allocation are in the
	// ledger and the client can open sessions.
	ConditionReady = "Ready"
	// ConditionLedgerReachable is false while PostgreSQL cannot be reached.
	ConditionLedgerReachable = "LedgerReachable"
	// ConditionLowCredit is true while the remaining hours are at or below
	// the agreement's low-credit threshold.
	ConditionLowCredit = "LowCredit"
)

// ClientAgreementStatus is what the operator observed last.
type ClientAgreementStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// consumedHours is the credits consumed, from the ledger.
	// +optional
	ConsumedHours int32 `json:"consumedHours"`

	// remainingHours is allocatedHours - consumedHours, never below 0.
	// +optional
	RemainingHours int32 `json:"remainingHours"`

	// activeSessions is the sessions whose 60-minute window has not ended.
	// +optional
	ActiveSessions int32 `json:"activeSessions"`

	// apiKeySecretName is the Secret holding the client's API key, under the
	// key "api-key", for the operator to hand over.
	// +optional
	APIKeySecretName string `json:"apiKeySecretName,omitempty"`

	// apiKeyFingerprint names the active key without revealing it.
	// +optional
	APIKeyFingerprint string `json:"apiKeyFingerprint,omitempty"`

	// previousAPIKeys are the replaced keys whose grace period runs, with
	// the time each is revoked.
	// +listType=map
	// +listMapKey=fingerprint
	// +optional
	PreviousAPIKeys []PreviousAPIKey `json:"previousAPIKeys,omitempty"`

	// observedGeneration is the generation of the spec this status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PreviousAPIKey is a replaced key that works until its revocation.
type PreviousAPIKey struct {
	// fingerprint names the key without revealing it.
	Fingerprint string `json:"fingerprint"`
	// revokeAt is when the key stops working and its sessions end.
	RevokeAt metav1.Time `json:"revokeAt"`
}

// ClientAgreement is a client's agreement: its credit allocation, its
// validity and, through the operator, its API key.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cla,categories=evalmeter
// +kubebuilder:selectablefield:JSONPath=`.spec.clientID`
// +kubebuilder:printcolumn:name="Client",type=string,JSONPath=`.spec.clientID`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.spec.allocatedHours`
// +kubebuilder:printcolumn:name="Consumed",type=integer,JSONPath=`.status.consumedHours`
// +kubebuilder:printcolumn:name="Remaining",type=integer,JSONPath=`.status.remainingHours`
// +kubebuilder:printcolumn:name="Valid-Until",type=string,format=date-time,JSONPath=`.spec.validUntil`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClientAgreement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClientAgreementSpec `json:"spec"`
	// +optional
	Status ClientAgreementStatus `json:"status,omitempty"`
}

// ClientAgreementList is a list of ClientAgreements.
// +kubebuilder:object:root=true
type ClientAgreementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClientAgreement `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClientAgreement{}, &ClientAgreementList{})
}
