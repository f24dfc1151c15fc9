package charts

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	evalmeter "github.com/evalmeter/evalmeter/client"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

// TestMonitoringQueriesAgainstScrapes: every PromQL expression of the alerts
// and of the dashboard parses with Prometheus's parser, and every metric it
// names is one that evalmeter really exposes. The exposed names come from
// scraping `evalmeter api` and `evalmeter controller`, run as processes on a
// throwaway PostgreSQL and this package's API server, after a ClientAgreement
// is provisioned and its client has opened a session and posted metrics, so
// that the per-agreement and per-request series exist.
func TestMonitoringQueriesAgainstScrapes(t *testing.T) {
	used := map[string][]string{} // metric name: where it is used
	for where, expr := range monitoringExprs(t) {
		e, err := parser.ParseExpr(grafanaVariables.Replace(expr))
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, expr)
			continue
		}
		parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok {
				name := vs.Name
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel && name == "" {
						name = m.Value
					}
				}
				used[name] = append(used[name], where)
			}
			return nil
		})
	}
	if len(used) == 0 {
		t.Fatal("no metric used by the alerts and the dashboard")
	}
	// What the dashboard must show: traffic, errors and latency, sessions,
	// credits by client, the pool's saturation, the controller's health.
	for _, name := range []string{"evalmeter_http_requests_total", "evalmeter_http_request_duration_seconds_bucket",
		"evalmeter_sessions_opened_total", "evalmeter_agreement_hours", "evalmeter_db_pool_connections",
		"evalmeter_db_pool_max_connections", "evalmeter_reconcile_errors_total", "workqueue_depth", "controller_runtime_reconcile_total"} {
		if !slices.ContainsFunc(used[name], func(w string) bool { return strings.HasPrefix(w, "dashboard panel") }) {
			t.Errorf("no dashboard panel shows %s", name)
		}
	}

	exposed, apiFamilies := scrapeEvalmeter(t)
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if _, cnpg := cloudNativePGSeries[name]; !exposed[name] && !prometheusSynthetic[name] && !cnpg {
			slices.Sort(used[name])
			t.Errorf("%s is not exposed by evalmeter api or controller; used by:\n  %s", name, strings.Join(used[name], "\n  "))
		}
	}
	t.Logf("%d metrics used, checked against the %d series names exposed", len(used), len(exposed))

	// histogram_quantile never exceeds the largest finite bucket, so the
	// schema refuses a latency threshold at or above it.
	var largest float64
	if f := apiFamilies["evalmeter_http_request_duration_seconds"]; f != nil && len(f.GetMetric()) > 0 {
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				largest = max(largest, b.GetUpperBound())
			}
		}
	}
	if bound := latencyThresholdBound(t); largest != bound {
		t.Errorf("the API's latency histogram's largest finite bucket is %v, values.schema.json's apiLatency.p95Seconds exclusiveMaximum %v: keep them equal", largest, bound)
	}
}

// prometheusSynthetic are the series Prometheus makes itself for each
// target, which no /metrics exposes: up (EvalmeterTargetDown). Only those
// the rules use; scrape_duration_seconds and the other scrape_* would join
// them here, and nothing else may.
var prometheusSynthetic = map[string]bool{"up": true}

// latencyThresholdBound is values.schema.json's exclusiveMaximum of
// monitoring.prometheusRule.alerts.apiLatency.p95Seconds.
func latencyThresholdBound(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("evalmeter/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	v := any(schema)
	for _, k := range []string{"properties", "monitoring", "properties", "prometheusRule", "properties", "alerts",
		"properties", "apiLatency", "properties", "p95Seconds", "exclusiveMaximum"} {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	bound, ok := v.(float64)
	if !ok {
		t.Fatal("values.schema.json has no exclusiveMaximum for apiLatency.p95Seconds")
	}
	return bound
}

// scrapeEvalmeter runs the API and the controller and returns the names of
// the series their /metrics expose (a histogram's _bucket, _sum and _count),
// and the API's metric families.
func scrapeEvalmeter(t *testing.T) (map[string]bool, map[string]*dto.MetricFamily) {
	t.Helper()
	ctx := context.Background()
	bin := proctest.Build(t, "..")
	databaseURL := pgtest.NewCluster(t).URL()

	ctrllog.SetLogger(logr.Discard()) // envtest's progress lines
	_, err := envtest.InstallCRDs(testEnv.Config, envtest.CRDInstallOptions{Paths: []string{"evalmeter/files/evalmeter.io_clientagreements.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := proctest.Kubeconfig(t, testEnv, "monitoring-test")

	metricsAddr, probeAddr, apiAddr, opsAddr := proctest.FreeAddr(t), proctest.FreeAddr(t), proctest.FreeAddr(t), proctest.FreeAddr(t)
	// The controller first: it migrates the database at start.
	proctest.Start(t, bin, []string{"DATABASE_URL=" + databaseURL, "KUBECONFIG=" + kubeconfig},
		"controller", "--metrics-bind-address="+metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address="+probeAddr, "--leader-elect=false", "--resync=1s")
	proctest.WaitOK(t, "http://"+probeAddr+"/readyz")
	proctest.Start(t, bin, []string{"DATABASE_URL=" + databaseURL, "EVALMETER_TOKEN_SECRET=" + strings.Repeat("monitoring-", 4)},
		"api", "--addr="+apiAddr, "--ops-addr="+opsAddr)
	proctest.WaitOK(t, "http://"+opsAddr+"/readyz")

	// An agreement with an end date, so that every per-agreement series exists.
	const ns = "monitoring-clients"
	objects := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		{Object: map[string]any{
			"apiVersion": "evalmeter.io/v1alpha1", "kind": "ClientAgreement",
			"metadata": map[string]any{"name": "acme", "namespace": ns},
			"spec": map[string]any{"clientID": "monitoring-acme", "allocatedHours": int64(3), "lowCreditThreshold": int64(2),
				"validUntil": time.Now().Add(10 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		}},
	}
	for _, o := range objects {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Active: the key of its Secret is in the ledger.
	polltest.Until(t, 60*time.Second, "the agreement Active", func() error {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("evalmeter.io/v1alpha1")
		o.SetKind("ClientAgreement")
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme"}, o); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(o.Object, "status", "phase"); phase != "Active" {
			return fmt.Errorf("phase %q", phase)
		}
		return nil
	})
	var secret corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-api-key"}, &secret); err != nil {
		t.Fatal(err)
	}
	key := string(secret.Data["api-key"])

	// A session and metrics, so that the request series exist.
	api, err := evalmeter.New("http://"+apiAddr, key)
	if err != nil {
		t.Fatal(err)
	}
	session, err := api.OpenSession(ctx, evalmeter.NewIdempotencyKey())
	if err != nil {
		t.Fatal(err)
	}
	request, err := os.ReadFile("../api/examples/metrics-request.json")
	if err != nil {
		t.Fatal(err)
	}
	// Twice with one key: the second is a replay, for evalmeter_idempotent_replays_total.
	metricsKey := evalmeter.NewIdempotencyKey()
	for range 2 {
		if _, err := api.PostMetrics(ctx, session.Token, metricsKey, request); err != nil {
			t.Fatal(err)
		}
	}

	exposed := map[string]bool{}
	var controller map[string]bool
	polltest.Until(t, 60*time.Second, "the agreement's series", func() error {
		families, err := scrape("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		controller = seriesNames(families)
		for _, name := range []string{"evalmeter_agreement_hours", "evalmeter_agreement_valid_until_timestamp_seconds",
			"evalmeter_agreement_low_credit_threshold_hours", "controller_runtime_reconcile_total"} {
			if !controller[name] {
				return fmt.Errorf("no %s yet", name)
			}
		}
		return nil
	})
	apiFamilies, err := scrape("http://" + opsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range []map[string]bool{controller, seriesNames(apiFamilies)} {
		for n := range names {
			exposed[n] = true
		}
	}
	return exposed, apiFamilies
}

// scrape returns the metric families url exposes.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return families, nil
}

// seriesNames returns the names of the series of families.
func seriesNames(families map[string]*dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}
