package charts

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/evalmeter/evalmeter/internal/charttest"
)

// The kinds the monitoring values add (besides the dashboard's ConfigMap).
var monitoringKinds = []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}

// monitoringValues turns every monitoring object on, as an install next to
// kube-prometheus-stack (release "kps" in namespace monitoring) would.
func monitoringValues() map[string]any {
	return map[string]any{
		"monitoring": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kps"}},
			"prometheusRule": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kps"}},
			"dashboard":      map[string]any{"enabled": true},
		},
		"networkPolicy": map[string]any{"monitoring": map[string]any{
			"namespaceLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"},
			"podLabels":       map[string]any{"app.kubernetes.io/name": "prometheus"},
		}},
	}
}

// allAlertsValues are monitoringValues with postgresql.cnpg.backup on: every
// alert renders, the backup alerts included.
func allAlertsValues() map[string]any { return merged(monitoringValues(), backupValues()) }

// merged returns base with extra merged in, maps recursively.
func merged(base, extra map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range extra {
		b, bok := out[k].(map[string]any)
		e, eok := v.(map[string]any)
		if bok && eok {
			out[k] = merged(b, e)
		} else {
			out[k] = v
		}
	}
	return out
}

func isDashboard(o *unstructured.Unstructured) bool {
	_, ok := o.GetLabels()["grafana_dashboard"]
	return o.GetKind() == "ConfigMap" && ok
}

// TestMonitoringOffByDefault: without the monitoring values nothing of the
// monitoring renders, in every configuration the chart is checked with, and
// the metrics ports stay closed to other namespaces.
func TestMonitoringOffByDefault(t *testing.T) {
	for name, values := range valueSets {
		objs, err := render(values, "evalmeter")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if slices.Contains(monitoringKinds, o.GetKind()) || isDashboard(o) {
				t.Errorf("%s: %s %s rendered with monitoring off", name, o.GetKind(), o.GetName())
			}
			if o.GetKind() != "NetworkPolicy" {
				continue
			}
			var p networkingv1.NetworkPolicy
			convert(t, o, &p)
			for _, rule := range p.Spec.Ingress {
				if len(rule.Ports) == 1 && rule.Ports[0].Port.String() == "http" {
					continue // networkPolicy.apiFrom's
				}
				for _, peer := range rule.From {
					if peer.NamespaceSelector != nil {
						t.Errorf("%s: NetworkPolicy %s admits namespaces %v", name, p.Name, peer.NamespaceSelector)
					}
				}
			}
		}
	}
}

// TestMonitoringNetworkPolicy: networkPolicy.monitoring admits the
// monitoring namespace (and only its labelled pods) to the API's ops port and
// the controller's metrics port, nothing else.
func TestMonitoringNetworkPolicy(t *testing.T) {
	namespace := map[string]any{"kubernetes.io/metadata.name": "monitoring"}
	pods := map[string]any{"app.kubernetes.io/name": "prometheus"}
	for _, c := range []struct {
		name   string
		values map[string]any
		peer   string // the monitoring peer, as YAML
	}{
		{name: "namespace", values: map[string]any{"namespaceLabels": namespace},
			peer: "namespaceSelector:\n  matchLabels:\n    kubernetes.io/metadata.name: monitoring"},
		{name: "namespace and pods", values: map[string]any{"namespaceLabels": namespace, "podLabels": pods},
			peer: "namespaceSelector:\n  matchLabels:\n    kubernetes.io/metadata.name: monitoring\npodSelector:\n  matchLabels:\n    app.kubernetes.io/name: prometheus"},
	} {
		objs := mustRender(t, map[string]any{"networkPolicy": map[string]any{"monitoring": c.values}})
		rules := func(policy string) map[string][]string { // port ("" for all): peers
			var p networkingv1.NetworkPolicy
			object(t, objs, "NetworkPolicy", policy, &p)
			out := map[string][]string{}
			for _, rule := range p.Spec.Ingress {
				port := ""
				if len(rule.Ports) > 0 {
					port = rule.Ports[0].Port.String()
				}
				for _, peer := range rule.From {
					b, _ := yaml.Marshal(peer)
					out[port] = append(out[port], strings.TrimSpace(string(b)))
				}
			}
			return out
		}
		want := map[string][]string{"ops": {"podSelector: {}", c.peer}}
		if got := rules("evalmeter-api"); !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: the API's NetworkPolicy admits %q, want %q", c.name, got, want)
		}
		want = map[string][]string{"": {"podSelector: {}"}, "metrics": {c.peer}}
		if got := rules("evalmeter-controller"); !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: the controller's NetworkPolicy admits %q, want %q", c.name, got, want)
		}
	}

	// Pod labels alone would select pods of the release's namespace, which are
	// admitted already: refused, rather than silently admitting nobody new.
	_, err := render(map[string]any{"networkPolicy": map[string]any{"monitoring": map[string]any{"podLabels": pods}}}, "evalmeter")
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.monitoring.podLabels needs namespaceLabels") {
		t.Errorf("podLabels without namespaceLabels: %v, want an error", err)
	}
}

// serviceMonitor is the part of a ServiceMonitor these tests read.
type serviceMonitor struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		ScrapeClass       string `json:"scrapeClass"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []map[string]any `json:"endpoints"`
	} `json:"spec"`
}

// prometheusCRDs installs prometheus-operator's ServiceMonitor, PodMonitor
// and PrometheusRule CRDs, at the version hack/prometheus-crds.sh pins, into the
// test's API server.
func prometheusCRDs(t *testing.T) {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "hack", "prometheus-crds.sh")).Output()
	if err != nil {
		t.Fatalf("hack/prometheus-crds.sh: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	ctrllog.SetLogger(logr.Discard()) // envtest's progress lines
	_, err = envtest.InstallCRDs(testEnv.Config, envtest.CRDInstallOptions{Paths: []string{
		filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(dir, "monitoring.coreos.com_podmonitors.yaml"),
		filepath.Join(dir, "monitoring.coreos.com_prometheusrules.yaml"),
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMonitoringServerSideDryRun lints the chart with every monitoring object
// on, in each way the controller's metrics can be served, and sends it to the
// API server with prometheus-operator's CRDs installed, as server-side dry
// runs with strict field validation (an unknown or misplaced field fails,
// rather than being pruned). It also checks what each ServiceMonitor
// scrapes: exactly one rendered Service with the port, named as the alerts'
// job label expects, and how the controller's endpoint authenticates.
func TestMonitoringServerSideDryRun(t *testing.T) {
	prometheusCRDs(t)
	for _, c := range []struct {
		name   string
		values map[string]any
		// The controller's endpoint, less port, path, interval and scrapeTimeout.
		endpoint    string
		scrapeClass string
	}{
		{name: "secure, self-signed", values: monitoringValues(),
			endpoint: `{"scheme": "https", "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token", "tlsConfig": {"insecureSkipVerify": true}}`},
		{name: "secure, certificate from a Secret", values: merged(monitoringValues(), map[string]any{
			"controller": map[string]any{"metrics": map[string]any{"secure": true, "certSecret": "evalmeter-metrics-tls"}},
		}), endpoint: `{"scheme": "https", "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
			"tlsConfig": {"ca": {"secret": {"name": "evalmeter-metrics-tls", "key": "ca.crt"}}, "serverName": "evalmeter-controller-metrics.chart-monitoring.svc"}}`},
		{name: "secure, scrape class", values: merged(monitoringValues(), map[string]any{
			"monitoring": map[string]any{
				"serviceMonitor": map[string]any{"enabled": true, "controllerScrapeClass": "service-account-token"},
				"dashboard":      map[string]any{"enabled": true, "namespace": "monitoring", "folder": "evalmeter", "annotations": map[string]any{"example.com/owner": "sre"}},
			},
		}), endpoint: `{"scheme": "https", "tlsConfig": {"insecureSkipVerify": true}}`, scrapeClass: "service-account-token"},
		{name: "plain HTTP", values: merged(monitoringValues(), map[string]any{
			"controller": map[string]any{"metrics": map[string]any{"secure": false}},
		}), endpoint: `{"scheme": "http"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			const ns = "chart-monitoring"
			for _, msg := range lint.All(chartDir, c.values, "evalmeter", false).Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", msg)
				}
			}
			objs, kinds := dryRun(t, c.values, ns, "monitoring")
			if kinds["ServiceMonitor"] != 2 || kinds["PrometheusRule"] != 1 {
				t.Errorf("rendered %v, want 2 ServiceMonitors and a PrometheusRule", kinds)
			}

			// What each ServiceMonitor scrapes: the Services it selects that
			// have its port. The alerts select job="<that Service>".
			jobs := map[string]string{"evalmeter-api": "evalmeter-api-ops", "evalmeter-controller": "evalmeter-controller-metrics"}
			for _, o := range objs {
				if o.GetKind() != "ServiceMonitor" {
					continue
				}
				var sm serviceMonitor
				convert(t, o, &sm)
				if sm.Metadata.Labels["release"] != "kps" {
					t.Errorf("ServiceMonitor %s lacks additionalLabels: %v", sm.Metadata.Name, sm.Metadata.Labels)
				}
				if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{ns}) {
					t.Errorf("ServiceMonitor %s watches namespaces %v", sm.Metadata.Name, sm.Spec.NamespaceSelector.MatchNames)
				}
				if len(sm.Spec.Endpoints) != 1 {
					t.Fatalf("ServiceMonitor %s has endpoints %v", sm.Metadata.Name, sm.Spec.Endpoints)
				}
				ep := sm.Spec.Endpoints[0]
				var scraped []string
				for _, s := range objs {
					if s.GetKind() != "Service" || !selects(sm.Spec.Selector.MatchLabels, s.GetLabels()) {
						continue
					}
					ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
					for _, p := range ports {
						if p.(map[string]any)["name"] == ep["port"] {
							scraped = append(scraped, s.GetName())
						}
					}
				}
				if want := jobs[sm.Metadata.Name]; !slices.Equal(scraped, []string{want}) {
					t.Errorf("ServiceMonitor %s scrapes the Services %v, want %s (the alerts' job)", sm.Metadata.Name, scraped, want)
				}
				if ep["path"] != "/metrics" || ep["interval"] != "30s" || ep["scrapeTimeout"] != "10s" {
					t.Errorf("ServiceMonitor %s endpoint %v", sm.Metadata.Name, ep)
				}
				if sm.Metadata.Name == "evalmeter-api" {
					if ep["scheme"] != "http" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
						t.Errorf("the API's endpoint %v, want plain HTTP", ep)
					}
					continue
				}
				var want map[string]any
				if err := json.Unmarshal([]byte(c.endpoint), &want); err != nil {
					t.Fatal(err)
				}
				got := maps.Clone(ep)
				for _, k := range []string{"port", "path", "interval", "scrapeTimeout"} {
					delete(got, k)
				}
				if !equality.Semantic.DeepEqual(got, want) {
					t.Errorf("the controller's endpoint is %v, want %v", got, want)
				}
				if sm.Spec.ScrapeClass != c.scrapeClass {
					t.Errorf("the controller's scrape class is %q, want %q", sm.Spec.ScrapeClass, c.scrapeClass)
				}
			}
			t.Logf("%d objects checked: %v", len(objs), kinds)
		})
	}
}

// TestMonitoringTokenWarning: whenever the controller's ServiceMonitor skips
// certificate verification, which sends Prometheus's ServiceAccount token to
// whatever pod the metrics Service selects, helm install says so and names
// controller.metrics.certSecret; otherwise it says nothing of it.
func TestMonitoringTokenWarning(t *testing.T) {
	metrics := func(m map[string]any) map[string]any {
		return merged(monitoringValues(), map[string]any{"controller": map[string]any{"metrics": m}})
	}
	for _, c := range []struct {
		name   string
		values map[string]any
		warn   bool
	}{
		{name: "secure, self-signed", values: monitoringValues(), warn: true},
		{name: "secure, scrape class", values: merged(monitoringValues(), map[string]any{
			"monitoring": map[string]any{"serviceMonitor": map[string]any{"controllerScrapeClass": "service-account-token"}},
		}), warn: true},
		{name: "secure, certificate from a Secret", values: metrics(map[string]any{"certSecret": "evalmeter-metrics-tls"})},
		{name: "plain HTTP", values: metrics(map[string]any{"secure": false})},
		{name: "no ServiceMonitor", values: map[string]any{}},
	} {
		notes, err := charttest.Notes(chartDir, "evalmeter", c.values)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		warned := strings.Contains(notes, "insecureSkipVerify") && strings.Contains(notes, "ServiceAccount token") &&
			strings.Contains(notes, "set controller.metrics.certSecret")
		if warned != c.warn {
			t.Errorf("%s: NOTES warn of the token %t, want %t:\n%s", c.name, warned, c.warn, notes)
		}
		var insecure bool
		for _, o := range mustRender(t, c.values) {
			if o.GetKind() == "ServiceMonitor" {
				eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
				for _, ep := range eps {
					skip, _, _ := unstructured.NestedBool(ep.(map[string]any), "tlsConfig", "insecureSkipVerify")
					insecure = insecure || skip
				}
			}
		}
		if insecure != c.warn {
			t.Errorf("%s: a ServiceMonitor skips verification: %t, yet NOTES warn: %t", c.name, insecure, c.warn)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestDashboardConfigMap: the dashboard's ConfigMap carries the sidecar's
// label, the folder annotation and the dashboard file as it is.
func TestDashboardConfigMap(t *testing.T) {
	objs := mustRender(t, map[string]any{"monitoring": map[string]any{"dashboard": map[string]any{
		"enabled": true, "label": "example.com/dashboard", "labelValue": "yes", "folder": "Evaluation", "namespace": "grafana",
	}}})
	var cm struct {
		Metadata struct {
			Namespace   string            `json:"namespace"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	object(t, objs, "ConfigMap", "evalmeter-dashboard", &cm)
	if cm.Metadata.Labels["example.com/dashboard"] != "yes" || cm.Metadata.Annotations["grafana_folder"] != "Evaluation" || cm.Metadata.Namespace != "grafana" {
		t.Errorf("the dashboard's ConfigMap has labels %v, annotations %v, namespace %q", cm.Metadata.Labels, cm.Metadata.Annotations, cm.Metadata.Namespace)
	}
	file, err := os.ReadFile("evalmeter/files/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["evalmeter.json"] != strings.TrimSpace(string(file)) {
		t.Error("the ConfigMap's evalmeter.json is not files/grafana-dashboard.json")
	}
}

// prometheusRule is the part of a PrometheusRule these tests read.
type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func renderedRule(t *testing.T, values map[string]any) (prometheusRule, *unstructured.Unstructured) {
	t.Helper()
	objs := mustRender(t, values)
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			var r prometheusRule
			convert(t, o, &r)
			return r, o
		}
	}
	t.Fatal("no PrometheusRule rendered")
	return prometheusRule{}, nil
}

// TestPrometheusRuleAnnotations: every alert has a severity, a summary, a
// description and a runbook_url whose anchor is a section of
// docs/runbooks.md; the values set thresholds, durations, severities, labels
// and the runbooks' address.
func TestPrometheusRuleAnnotations(t *testing.T) {
	runbooks, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{} // GitHub's anchors of the level-2 headings
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(runbooks), -1) {
		sections[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(m[1]), " ", "-"))] = true
	}
	const base = "https://github.com/evalmeter/evalmeter/blob/main/docs/runbooks.md#"
	rule, _ := renderedRule(t, allAlertsValues())
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts++
			anchor := strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != base+anchor {
				t.Errorf("%s: runbook_url %q, want %s%s", r.Alert, r.Annotations["runbook_url"], base, anchor)
			}
			if !sections[anchor] {
				t.Errorf("%s: docs/runbooks.md has no section ## %s", r.Alert, r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" || r.For == "" {
				t.Errorf("%s: no summary, description, severity or for: %+v", r.Alert, r)
			}
		}
	}
	if alerts != len(sections) {
		t.Errorf("%d alerts, %d runbook sections: one each", alerts, len(sections))
	}

	rule, _ = renderedRule(t, merged(monitoringValues(), map[string]any{"monitoring": map[string]any{
		"prometheusRule": map[string]any{
			"enabled":        true,
			"runbookBaseURL": "https://wiki.example.com/evalmeter",
			"alertLabels":    map[string]any{"team": "evaluation"},
			"alerts": map[string]any{
				"agreementExpiring": map[string]any{"days": 30, "for": "1h", "severity": "info"},
				"apiErrors":         map[string]any{"ratio": 0.07, "for": "5m", "severity": "critical"},
			},
		},
	}}))
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Labels["team"] != "evaluation" || !strings.HasPrefix(r.Annotations["runbook_url"], "https://wiki.example.com/evalmeter#") {
				t.Errorf("%s: labels %v, runbook_url %s", r.Alert, r.Labels, r.Annotations["runbook_url"])
			}
			switch r.Alert {
			case "EvalmeterAgreementExpiringSoon":
				if !strings.Contains(r.Expr, "< 30 * 86400") || r.For != "1h" || r.Labels["severity"] != "info" {
					t.Errorf("%s: expr %q, for %s, labels %v", r.Alert, r.Expr, r.For, r.Labels)
				}
			case "EvalmeterAPIErrors":
				if !strings.Contains(r.Expr, "> 0.07") || !strings.Contains(r.Annotations["description"], "(threshold 7%)") {
					t.Errorf("%s: expr %q, description %q", r.Alert, r.Expr, r.Annotations["description"])
				}
			}
		}
	}
}

// promtool returns bin/promtool, built by `make promtool` at go.mod's
// Prometheus version when it is missing or of another version.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "bin", "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	want := prometheusRelease(t)
	current := func() bool {
		out, err := exec.Command(bin, "--version").Output()
		return err == nil && strings.Contains(string(out), "version "+want+" ")
	}
	if !current() {
		t.Logf("building bin/promtool %s with make promtool", want)
		cmd := exec.Command("make", "promtool")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make promtool: %v\n%s", err, out)
		}
		if !current() {
			t.Fatalf("bin/promtool --version does not report %s", want)
		}
	}
	return bin
}

// prometheusRelease is the Prometheus release of go.mod's
// github.com/prometheus/prometheus: module v0.310.0 is Prometheus 3.10.0.
func prometheusRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/prometheus v0\.(\d)(\d\d)\.(\d+)\b`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod requires no github.com/prometheus/prometheus v0.3XY.Z")
	}
	return fmt.Sprintf("%s.%s.%s", m[1], strings.TrimPrefix(string(m[2]), "0"), m[3])
}

// TestPrometheusRules checks the rendered PrometheusRule's groups with
// promtool: `check rules` (syntax, templates, the linter) and `test rules`
// with the unit tests of testdata/prometheusrule_test.yaml, which must fire
// and not fire every alert.
func TestPrometheusRules(t *testing.T) {
	bin := promtool(t)
	_, obj := renderedRule(t, allAlertsValues())
	groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "groups")
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests, err := os.ReadFile("testdata/prometheusrule_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The unit tests name rules.yaml, beside them.
	for name, b := range map[string][]byte{"rules.yaml": rules, "prometheusrule_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"check", "rules", "--lint=all", "--lint-fatal", "rules.yaml"},
		{"test", "rules", "prometheusrule_test.yaml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// Every alert fires in some test and stays silent in another.
	var unit struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &unit); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, test := range unit.Tests {
		for _, a := range test.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	var rule prometheusRule
	convert(t, obj, &rule)
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("%s: testdata/prometheusrule_test.yaml must have it fire (%v) and not fire (%v)", r.Alert, fires[r.Alert], silent[r.Alert])
			}
		}
	}
}

// monitoringExprs returns the PromQL of the alerts and of the dashboard, by
// where each is.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	rule, _ := renderedRule(t, allAlertsValues())
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	var dashboard struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	b, err := os.ReadFile("evalmeter/files/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dashboard); err != nil {
		t.Fatalf("files/grafana-dashboard.json: %v", err)
	}
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				exprs[fmt.Sprintf("dashboard panel %q %s", p.Title, target.RefID)] = target.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	// A query variable's label_values(METRIC, LABEL) reads METRIC's series.
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, v := range dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is not label_values(METRIC, LABEL)", v.Name, q)
			continue
		}
		exprs["dashboard variable "+v.Name] = m[1]
	}
	return exprs
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

// grafanaVariables stands in for the dashboard's variables, so that its
// queries parse as Grafana sends them.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "5m", "${__rate_interval}", "5m", "$__interval", "1m", "$__range", "6h",
	"$namespace", "evalmeter", "${namespace}", "evalmeter",
)

// TestMonitoringValuesSchema: values.schema.json refuses monitoring values the
// chart or Prometheus cannot work with.
func TestMonitoringValuesSchema(t *testing.T) {
	alert := func(name string, v map[string]any) map[string]any {
		return map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"alerts": map[string]any{name: v}}}}
	}
	for name, values := range map[string]map[string]any{
		"unknown monitoring key": {"monitoring": map[string]any{"podMonitor": map[string]any{"enabled": true}}},
		"unknown alert":          alert("certificateExpiry", map[string]any{"for": "5m"}),
		"pruning hourly":         alert("pruning", map[string]any{"maxAgeHours": 1}),
		"unknown alert setting":  alert("apiErrors", map[string]any{"threshold": 0.1}),
		"ratio above 1":          alert("apiErrors", map[string]any{"ratio": 5}),
		"ratio 0":                alert("ledgerUnavailable", map[string]any{"ratio": 0}),
		// histogram_quantile never exceeds the largest finite bucket, 2.5 s: a
		// threshold at or above it could never fire.
		"p95 at the largest bucket": alert("apiLatency", map[string]any{"p95Seconds": 2.5}),
		"p95 above every bucket":    alert("apiLatency", map[string]any{"p95Seconds": 10}),
		"bad for":                   alert("apiLatency", map[string]any{"for": "soon"}),
		"target down, bad for":      alert("targetDown", map[string]any{"for": "5"}),
		"target down, threshold":    alert("targetDown", map[string]any{"ratio": 0.5}),
		"for with a space":          alert("apiLatency", map[string]any{"for": "5 m"}),
		"no days":                   alert("agreementExpiring", map[string]any{"days": 0}),
		"negative count":            alert("reconcileErrors", map[string]any{"count": -1}),
		"bad severity":              alert("agreementLowCredit", map[string]any{"severity": "very bad"}),
		"bad interval":              {"monitoring": map[string]any{"serviceMonitor": map[string]any{"interval": "30"}}},
		"severity as alert label":   {"monitoring": map[string]any{"prometheusRule": map[string]any{"alertLabels": map[string]any{"severity": "page"}}}},
		"runbook URL with anchor":   {"monitoring": map[string]any{"prometheusRule": map[string]any{"runbookBaseURL": "https://example.com/r.md#top"}}},
		"bad dashboard label":       {"monitoring": map[string]any{"dashboard": map[string]any{"label": "grafana dashboard"}}},
		"dashboard label value":     {"monitoring": map[string]any{"dashboard": map[string]any{"labelValue": 1}}},
		"unknown policy key":        {"networkPolicy": map[string]any{"monitoring": map[string]any{"namespaces": []any{"monitoring"}}}},
		"label value not string":    {"networkPolicy": map[string]any{"monitoring": map[string]any{"namespaceLabels": map[string]any{"monitoring": true}}}},
	} {
		if _, err := render(values, "evalmeter"); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: rendered (%v), want a schema error", name, err)
		}
	}
	if _, err := render(alert("apiLatency", map[string]any{"p95Seconds": 2.4}), "evalmeter"); err != nil {
		t.Errorf("p95Seconds 2.4, below the largest bucket: %v", err)
	}
}
