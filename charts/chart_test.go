// Package charts tests the Helm chart: lint, its values schema, and every
// object it renders, checked by a real kube-apiserver (server-side dry run).
package charts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const chartDir = "evalmeter"

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		out, err := exec.Command(filepath.Join("..", "hack", "envtest.sh")).Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hack/envtest.sh:", err)
			return 1
		}
		assets = strings.TrimSpace(string(out))
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer env.Stop()
	if k8s, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// valueSets are the configurations the chart is rendered and checked with.
var valueSets = map[string]map[string]any{
	"defaults": {},
	"evaluation install": {
		"postgresql":    map[string]any{"enabled": true},
		"api":           map[string]any{"service": map[string]any{"type": "NodePort", "nodePort": 30080}},
		"ingress":       map[string]any{"enabled": true, "className": "nginx", "host": "metrics.example.com", "tlsSecret": "metrics-tls"},
		"networkPolicy": map[string]any{"apiFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "ingress-nginx"}}}}},
	},
	"production": {
		"image":            map[string]any{"repository": "registry.example.com/evalmeter", "tag": "0.1.0"},
		"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		"tokenSecret":      map[string]any{"existingSecret": "evalmeter-token", "existingSecretKey": "key"},
		"api": map[string]any{
			"tlsSecret":   "evalmeter-tls",
			"autoscaling": map[string]any{"enabled": true, "maxReplicas": 6},
			"service":     map[string]any{"type": "LoadBalancer", "port": 443},
		},
		"controller": map[string]any{"watchNamespaces": []any{"team-a", "team-b"}},
	},
	"minimal": {
		"crds":          map[string]any{"create": false},
		"networkPolicy": map[string]any{"enabled": false},
		"api":           map[string]any{"replicas": 1, "podDisruptionBudget": map[string]any{"enabled": false}, "topologySpread": false},
		"controller":    map[string]any{"leaderElect": false},
	},
}

// render renders the chart as `helm install --dry-run` would, in namespace.
func render(values map[string]any, namespace string) ([]*unstructured.Unstructured, error) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "evalmeter", namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
	rel, err := install.Run(chart, values)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var o unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return nil, fmt.Errorf("%v:\n%s", err, doc)
		}
		if len(o.Object) > 0 {
			objs = append(objs, &o)
		}
	}
	return objs, nil
}

func TestLint(t *testing.T) {
	for name, values := range valueSets {
		linter := lint.All(chartDir, values, "evalmeter", false)
		for _, msg := range linter.Messages {
			if msg.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", name, msg)
			}
		}
	}
}

// TestValuesSchema: values.schema.json refuses what the chart cannot work with.
func TestValuesSchema(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"unknown key":            {"replicas": 3},
		"unknown nested key":     {"api": map[string]any{"replica": 3}},
		"no replicas":            {"api": map[string]any{"replicas": 0}},
		"bad log level":          {"api": map[string]any{"logLevel": "loud"}},
		"bad duration":           {"controller": map[string]any{"resync": "soon"}},
		"no database":            {"database": map[string]any{"existingSecret": ""}},
		"bad namespace":          {"controller": map[string]any{"watchNamespaces": []any{"Team_A"}}},
		"bad storage size":       {"postgresql": map[string]any{"enabled": true, "storage": map[string]any{"size": "lots"}}},
		"string for a boolean":   {"crds": map[string]any{"create": "yes"}},
		"bad pull policy":        {"image": map[string]any{"pullPolicy": "Sometimes"}},
		"service port too high":  {"api": map[string]any{"service": map[string]any{"port": 70000}}},
		"node port out of range": {"api": map[string]any{"service": map[string]any{"type": "NodePort", "nodePort": 8080}}},
	} {
		if _, err := render(values, "evalmeter"); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: rendered (%v), want a schema error", name, err)
		}
	}
}

// TestServerSideDryRun sends every rendered object, the CRD and the
// cluster-wide RBAC included, to the kube-apiserver as a server-side apply
// in dry-run mode: the API server checks each against its real schema and
// stores nothing.
func TestServerSideDryRun(t *testing.T) {
	ctx := context.Background()
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			ns := "chart-" + strings.ReplaceAll(name, " ", "-")
			namespaces := []string{ns, "team-a", "team-b"}
			for _, n := range namespaces {
				err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
				if err != nil && !strings.Contains(err.Error(), "already exists") {
					t.Fatal(err)
				}
			}
			objs, err := render(values, ns)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
				if o.GetNamespace() == "" && namespaced(o.GetKind()) {
					o.SetNamespace(ns)
				}
				if err := k8s.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			for _, kind := range []string{"Deployment", "Service", "ServiceAccount"} {
				if kinds[kind] == 0 {
					t.Errorf("no %s rendered: %v", kind, kinds)
				}
			}
			t.Logf("%d objects checked: %v", len(objs), kinds)
		})
	}
}

func namespaced(kind string) bool {
	return !slices.Contains([]string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace"}, kind)
}

// TestGeneratedCopies: the chart's CRD and controller rules are those
// controller-gen generates under config/.
func TestGeneratedCopies(t *testing.T) {
	objs, err := render(map[string]any{}, "evalmeter")
	if err != nil {
		t.Fatal(err)
	}
	var generatedCRD apiextensionsv1.CustomResourceDefinition
	var generatedRole rbacv1.ClusterRole
	readYAML(t, "../config/crd/bases/evalmeter.io_clientagreements.yaml", &generatedCRD)
	readYAML(t, "../config/rbac/role.yaml", &generatedRole)

	found := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			found++
			var crd apiextensionsv1.CustomResourceDefinition
			convert(t, o, &crd)
			if !equality.Semantic.DeepEqual(crd.Spec, generatedCRD.Spec) {
				t.Error("the chart's CRD is not config/crd/bases': run make manifests")
			}
			if crd.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Error("the CRD is not kept on uninstall")
			}
		case "ClusterRole":
			found++
			var role rbacv1.ClusterRole
			convert(t, o, &role)
			if !equality.Semantic.DeepEqual(normalize(role.Rules), normalize(generatedRole.Rules)) {
				t.Errorf("the chart's controller rules differ from config/rbac/role.yaml:\n%v\n%v", role.Rules, generatedRole.Rules)
			}
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the CRD and the ClusterRole", found)
	}
}

func normalize(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := slices.Clone(rules)
	for i := range out {
		out[i].Verbs = slices.Sorted(slices.Values(out[i].Verbs))
	}
	slices.SortFunc(out, func(a, b rbacv1.PolicyRule) int {
		return strings.Compare(fmt.Sprint(a.APIGroups, a.Resources), fmt.Sprint(b.APIGroups, b.Resources))
	})
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func convert(t *testing.T, o *unstructured.Unstructured, v any) {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
