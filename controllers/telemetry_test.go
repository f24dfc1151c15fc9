package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// TestAgreementMetrics: the per-agreement gauges follow the ledger, errors
// are counted by reason, and an agreement's series go with it.
func TestAgreementMetrics(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	end := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	ca := agreement(ns, "metered", "acme-metrics", 4)
	ca.Spec.ValidUntil = &metav1.Time{Time: end}
	if err := k8sClient.Create(ctx, ca); err != nil {
		t.Fatal(err)
	}
	phase(t, ns, "metered", evalmeterv1alpha1.PhaseActive)
	now := time.Now().UTC().Truncate(time.Microsecond)
	id, _ := credential.NewSessionID(rand.Reader)
	if _, _, err := store.OpenSession(ctx, "metrics-session-0001", ledger.Session{ID: id, ClientID: "acme-metrics", IssuedAt: now, ExpiresAt: now.Add(time.Hour), TokenKeyID: "k"}, "test"); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"namespace": ns, "name": "metered", "client_id": "acme-metrics"}
	want := []struct {
		name  string
		extra map[string]string
		value float64
	}{
		{"evalmeter_agreement_hours", map[string]string{"kind": "allocated"}, 4},
		{"evalmeter_agreement_hours", map[string]string{"kind": "consumed"}, 1},
		{"evalmeter_agreement_hours", map[string]string{"kind": "remaining"}, 3},
		{"evalmeter_agreement_active_sessions", nil, 1},
		{"evalmeter_agreement_phase", map[string]string{"phase": "Active"}, 1},
		{"evalmeter_agreement_phase", map[string]string{"phase": "Exhausted"}, 0},
		{"evalmeter_agreement_valid_until_timestamp_seconds", nil, float64(end.Unix())},
	}
	polltest.Until(t, wait, "the agreement's gauges", func() error {
		for _, w := range want {
			l := map[string]string{"__name__": w.name}
			for k, v := range labels {
				l[k] = v
			}
			for k, v := range w.extra {
				l[k] = v
			}
			if got, ok := metricValue(t, l); !ok || got != w.value {
				return fmt.Errorf("%v = %v (present %v), want %v", l, got, ok, w.value)
			}
		}
		return nil
	})

	before, _ := metricValue(t, map[string]string{"__name__": "evalmeter_reconcile_errors_total", "reason": "invalid_api_key"})
	setAPIKey(t, ns, "metered", "not-a-key")
	waitReady(t, ns, "metered", "InvalidAPIKey", "not an evalmeter API key")
	if after, _ := metricValue(t, map[string]string{"__name__": "evalmeter_reconcile_errors_total", "reason": "invalid_api_key"}); after <= before {
		t.Errorf("evalmeter_reconcile_errors_total{reason=invalid_api_key} %v, then %v: not counted", before, after)
	}

	if err := k8sClient.Delete(ctx, get(t, ns, "metered")); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, wait, "the agreement's series gone", func() error {
		if v, ok := metricValue(t, map[string]string{"__name__": "evalmeter_agreement_hours", "namespace": ns, "name": "metered", "client_id": "acme-metrics", "kind": "remaining"}); ok {
			return fmt.Errorf("still exported: %v", v)
		}
		return nil
	})
}

// metricValue finds the one series of the controller's registry with
// exactly the labels in want (and the name __name__).
func metricValue(t *testing.T, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != want["__name__"] {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsMatch(m.GetLabel(), want) {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue(), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func labelsMatch(have []*dto.LabelPair, want map[string]string) bool {
	if len(have) != len(want)-1 {
		return false
	}
	for _, p := range have {
		if want[p.GetName()] != p.GetValue() {
			return false
		}
	}
	return true
}

// TestLowCredit: an agreement whose remaining hours reach its threshold
// reports LowCredit with a Warning event, and the gauges carry the
// threshold; the controller's default (1 in the suite) applies without one.
func TestLowCredit(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	own := agreement(ns, "own", "acme-low-own", 4)
	own.Spec.LowCreditThreshold = ptr.To(int32(2))
	for _, ca := range []*evalmeterv1alpha1.ClientAgreement{own, agreement(ns, "default", "acme-low-default", 4)} {
		if err := k8sClient.Create(ctx, ca); err != nil {
			t.Fatal(err)
		}
		ca := phase(t, ns, ca.Name, evalmeterv1alpha1.PhaseActive)
		if c := meta.FindStatusCondition(ca.Status.Conditions, evalmeterv1alpha1.ConditionLowCredit); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("%s with all its credit: LowCredit %+v", ca.Name, c)
		}
	}
	spent := 0
	spend := func(clientID string, n int) {
		for range n {
			spent++
			i := spent
			now := time.Now().UTC().Truncate(time.Microsecond)
			id, _ := credential.NewSessionID(rand.Reader)
			if _, _, err := store.OpenSession(ctx, fmt.Sprintf("low-credit-%s-%04d", clientID, i), ledger.Session{ID: id, ClientID: clientID, IssuedAt: now, ExpiresAt: now.Add(time.Hour), TokenKeyID: "k"}, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	spend("acme-low-own", 2)     // 2 left: at its threshold of 2
	spend("acme-low-default", 2) // 2 left: above the default of 1
	lowCredit := func(name string, want metav1.ConditionStatus) {
		t.Helper()
		polltest.Until(t, wait, name+" LowCredit "+string(want), func() error {
			c := meta.FindStatusCondition(get(t, ns, name).Status.Conditions, evalmeterv1alpha1.ConditionLowCredit)
			if c == nil || c.Status != want {
				return fmt.Errorf("%+v", c)
			}
			return nil
		})
	}
	lowCredit("own", metav1.ConditionTrue)
	event(t, ns, "own", "LowCredit")
	polltest.Until(t, wait, "default: 2 remaining", func() error {
		if r := get(t, ns, "default").Status.RemainingHours; r != 2 {
			return fmt.Errorf("remaining %d", r)
		}
		return nil
	})
	lowCredit("default", metav1.ConditionFalse)
	spend("acme-low-default", 1)
	lowCredit("default", metav1.ConditionTrue)

	// The ledger holds the threshold, for the customer's usage header.
	for clientID, want := range map[string]int{"acme-low-own": 2, "acme-low-default": 1} {
		if u, err := store.Usage(ctx, clientID, time.Now()); err != nil || u.LowCreditThreshold == nil || *u.LowCreditThreshold != want {
			t.Errorf("%s: ledger threshold %v, %v; want %d", clientID, u.LowCreditThreshold, err, want)
		}
	}
	for name, want := range map[string]float64{"own": 2, "default": 1} {
		l := map[string]string{"__name__": "evalmeter_agreement_low_credit_threshold_hours", "namespace": ns, "name": name, "client_id": "acme-low-" + name}
		if got, ok := metricValue(t, l); !ok || got != want {
			t.Errorf("%s: threshold gauge %v (present %v), want %v", name, got, ok, want)
		}
	}
}
