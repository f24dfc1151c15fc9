package charts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/evalmeter/evalmeter/internal/charttest"
	"github.com/evalmeter/evalmeter/internal/envtesttest"
	"github.com/evalmeter/evalmeter/receipt"
)

const chartDir = "evalmeter"

var k8s client.Client

// testEnv is the envtest API server, for tests that install CRDs or need a
// kubeconfig.
var testEnv *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := envtesttest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	testEnv = env
	if k8s, err = client.New(env.Config, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The "cloudnativepg" value set renders a CloudNativePG Cluster.
	if err := installCloudNativePGCRDs(); err != nil {
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
		"tokenSecret":      map[string]any{"existingSecret": "evalmeter-token", "existingSecretKey": "key", "previousExistingSecret": "evalmeter-token-1"},
		"database":         map[string]any{"existingSecret": "evalmeter-database", "maxConns": 8},
		"api": withExtras(map[string]any{
			"tlsSecret":   "evalmeter-tls",
			"autoscaling": map[string]any{"enabled": true, "maxReplicas": 6},
			"service":     map[string]any{"type": "LoadBalancer", "port": 443},
		}),
		"controller": withExtras(map[string]any{"watchNamespaces": []any{"team-a", "team-b"}}),
	},
	"cloudnativepg": {
		"postgresql": map[string]any{"cnpg": map[string]any{
			"enabled": true, "storage": map[string]any{"size": "20Gi", "storageClass": "fast"},
			"parameters": map[string]any{"shared_buffers": "256MB", "log_min_duration_statement": "1000"},
		}},
		"api": map[string]any{"autoscaling": map[string]any{"enabled": true}},
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
	return charttest.Render(chartDir, namespace, values)
}

// renderFor renders the chart for a cluster of Kubernetes version kubeVersion
// ("v1.36.3").
func renderFor(kubeVersion string, values map[string]any, namespace string) ([]*unstructured.Unstructured, error) {
	return charttest.RenderFor(chartDir, kubeVersion, namespace, values)
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
		"unknown key":             {"replicas": 3},
		"unknown nested key":      {"api": map[string]any{"replica": 3}},
		"no replicas":             {"api": map[string]any{"replicas": 0}},
		"bad log level":           {"api": map[string]any{"logLevel": "loud"}},
		"public URL with a query": {"receipts": map[string]any{"publicURL": "https://e.example/?a=1"}},
		"receipts misspelt":       {"receipts": map[string]any{"enable": true}},
		"bad duration":            {"controller": map[string]any{"resync": "soon"}},
		"no database":             {"database": map[string]any{"existingSecret": ""}},
		"bad namespace":           {"controller": map[string]any{"watchNamespaces": []any{"Team_A"}}},
		"bad storage size":        {"postgresql": map[string]any{"enabled": true, "storage": map[string]any{"size": "lots"}}},
		"string for a boolean":    {"crds": map[string]any{"create": "yes"}},
		"bad pull policy":         {"image": map[string]any{"pullPolicy": "Sometimes"}},
		"service port too high":   {"api": map[string]any{"service": map[string]any{"port": 70000}}},
		"node port out of range":  {"api": map[string]any{"service": map[string]any{"type": "NodePort", "nodePort": 8080}}},
		"no connections":          {"database": map[string]any{"maxConns": 0}},
		"connections as a word":   {"postgresql": map[string]any{"maxConnections": "many"}},
		"bad previous secret":     {"tokenSecret": map[string]any{"previousExistingSecret": "Old_Token"}},
		"empty previous key":      {"tokenSecret": map[string]any{"previousExistingSecret": "old", "previousExistingSecretKey": ""}},
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
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			ns := "chart-" + strings.ReplaceAll(name, " ", "-")
			objs, kinds := dryRun(t, values, ns, "team-a", "team-b")
			for _, kind := range []string{"Deployment", "Service", "ServiceAccount"} {
				if kinds[kind] == 0 {
					t.Errorf("no %s rendered: %v", kind, kinds)
				}
			}
			t.Logf("%d objects checked: %v", len(objs), kinds)
		})
	}
}

// dryRun renders the chart with values into ns, creates ns and the other
// namespaces, and sends every object to the API server as a server-side
// apply dry run with strict field validation. It returns the objects and
// how many of each kind there are.
func dryRun(t *testing.T, values map[string]any, ns string, others ...string) ([]*unstructured.Unstructured, map[string]int) {
	t.Helper()
	ctx := context.Background()
	for _, n := range append([]string{ns}, others...) {
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
		if err := k8s.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("chart-test"), client.ForceOwnership,
			client.FieldValidation("Strict")); err != nil {
			t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return objs, kinds
}

func namespaced(kind string) bool {
	return !slices.Contains([]string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace"}, kind)
}

// TestGeneratedCopies: the chart's CRD and ClusterRoles are those under
// config/: the CRD and the controller's rules generated by controller-gen,
// the metrics roles of the kustomize tree.
func TestGeneratedCopies(t *testing.T) {
	objs, err := render(map[string]any{}, "evalmeter")
	if err != nil {
		t.Fatal(err)
	}
	var generatedCRD apiextensionsv1.CustomResourceDefinition
	readYAML(t, "../config/crd/bases/evalmeter.io_clientagreements.yaml", &generatedCRD)
	roles := map[string]string{ // the chart's ClusterRole -> config/rbac's
		"evalmeter-controller":     "role.yaml",
		"evalmeter-metrics-auth":   "metrics_auth_role.yaml",
		"evalmeter-metrics-reader": "metrics_reader_role.yaml",
	}

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
			file, ok := roles[o.GetName()]
			if !ok {
				t.Errorf("ClusterRole %s has no counterpart under config/rbac", o.GetName())
				continue
			}
			found++
			var role, generated rbacv1.ClusterRole
			convert(t, o, &role)
			readYAML(t, filepath.Join("..", "config", "rbac", file), &generated)
			if !equality.Semantic.DeepEqual(normalize(role.Rules), normalize(generated.Rules)) {
				t.Errorf("the rules of ClusterRole %s differ from config/rbac/%s:\n%v\n%v", o.GetName(), file, role.Rules, generated.Rules)
			}
		}
	}
	if found != 1+len(roles) {
		t.Fatalf("found %d of the CRD and the %d ClusterRoles", found, len(roles))
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

// object returns the rendered object of kind and name, converted into v.
func object(t *testing.T, objs []*unstructured.Unstructured, kind, name string, v any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			convert(t, o, v)
			return
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
}

// container returns the container name of a rendered Deployment.
func container(t *testing.T, objs []*unstructured.Unstructured, deployment, name string) corev1.Container {
	t.Helper()
	var d appsv1.Deployment
	object(t, objs, "Deployment", deployment, &d)
	for _, c := range append(d.Spec.Template.Spec.Containers, d.Spec.Template.Spec.InitContainers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", deployment, name)
	return corev1.Container{}
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func mustRender(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(values, "evalmeter")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestOpsPortNotPublished: the API's Service carries the API port only, so
// that a NodePort or LoadBalancer never publishes /metrics and /readyz;
// those have a ClusterIP Service of their own, and the NetworkPolicy opens
// the ops port to this namespace only.
func TestOpsPortNotPublished(t *testing.T) {
	for _, typ := range []string{"ClusterIP", "NodePort", "LoadBalancer"} {
		objs := mustRender(t, map[string]any{"api": map[string]any{"service": map[string]any{"type": typ}}})
		var api, ops corev1.Service
		object(t, objs, "Service", "evalmeter-api", &api)
		object(t, objs, "Service", "evalmeter-api-ops", &ops)
		if len(api.Spec.Ports) != 1 || api.Spec.Ports[0].TargetPort.String() != "http" {
			t.Errorf("%s: the API Service has ports %+v, want the API port only", typ, api.Spec.Ports)
		}
		if ops.Spec.Type != corev1.ServiceTypeClusterIP || len(ops.Spec.Ports) != 1 ||
			ops.Spec.Ports[0].TargetPort.String() != "ops" || ops.Spec.Ports[0].Port != 9090 {
			t.Errorf("%s: the ops Service is %s with ports %+v, want ClusterIP with ops on 9090", typ, ops.Spec.Type, ops.Spec.Ports)
		}
		if !equality.Semantic.DeepEqual(ops.Spec.Selector, api.Spec.Selector) {
			t.Errorf("%s: the ops Service selects %v, the API's %v", typ, ops.Spec.Selector, api.Spec.Selector)
		}
	}

	apiFrom := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "ingress-nginx"}}}}
	objs := mustRender(t, map[string]any{"networkPolicy": map[string]any{"apiFrom": apiFrom}})
	var policy networkingv1.NetworkPolicy
	object(t, objs, "NetworkPolicy", "evalmeter-api", &policy)
	opened := map[string]string{}
	for _, rule := range policy.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil {
			t.Fatalf("an API ingress rule opens ports %+v, want one named port per rule", rule.Ports)
		}
		from, _ := yaml.Marshal(rule.From)
		opened[rule.Ports[0].Port.String()] = strings.TrimSpace(string(from))
	}
	want := map[string]string{
		"http": "- namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: ingress-nginx",
		"ops":  "- podSelector: {}",
	}
	if !equality.Semantic.DeepEqual(opened, want) {
		t.Errorf("the API's NetworkPolicy opens %q, want %q", opened, want)
	}
}

// TestDatabaseMaxConns: database.maxConns bounds the pool of the API and of
// the controller.
func TestDatabaseMaxConns(t *testing.T) {
	for values, want := range map[string]string{`{}`: "5", `{"database": {"maxConns": 7}}`: "7"} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(values), &v); err != nil {
			t.Fatal(err)
		}
		objs := mustRender(t, v)
		for deployment, name := range map[string]string{"evalmeter-api": "api", "evalmeter-controller": "controller"} {
			env := envVar(container(t, objs, deployment, name), "EVALMETER_DB_MAX_CONNS")
			if env == nil || env.Value != want {
				t.Errorf("%s: %s has EVALMETER_DB_MAX_CONNS %+v, want %s", values, name, env, want)
			}
		}
	}
}

// withExtras adds to a component's values what an OpenTelemetry setup and
// a database CA need: an annotation, environment, a volume and its mount.
func withExtras(v map[string]any) map[string]any {
	v["podAnnotations"] = map[string]any{"example.com/traced": "true"}
	v["extraEnv"] = []any{map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector:4317"}}
	v["extraVolumes"] = []any{map[string]any{"name": "db-ca", "configMap": map[string]any{"name": "db-ca"}}}
	v["extraVolumeMounts"] = []any{map[string]any{"name": "db-ca", "mountPath": "/etc/evalmeter/db-ca", "readOnly": true}}
	return v
}

// TestExtras: podAnnotations, extraEnv, extraVolumes and extraVolumeMounts
// reach the API (its migrations too) and the controller.
func TestExtras(t *testing.T) {
	objs := mustRender(t, map[string]any{"api": withExtras(map[string]any{}), "controller": withExtras(map[string]any{})})
	for deployment, containers := range map[string][]string{"evalmeter-api": {"api", "migrate"}, "evalmeter-controller": {"controller"}} {
		var d appsv1.Deployment
		object(t, objs, "Deployment", deployment, &d)
		pod := d.Spec.Template
		if pod.Annotations["example.com/traced"] != "true" {
			t.Errorf("%s: pod annotations %v", deployment, pod.Annotations)
		}
		if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "db-ca" && v.ConfigMap != nil }) {
			t.Errorf("%s: volumes %v lack db-ca", deployment, pod.Spec.Volumes)
		}
		for _, name := range containers {
			c := container(t, objs, deployment, name)
			if env := envVar(c, "OTEL_EXPORTER_OTLP_ENDPOINT"); env == nil || env.Value != "http://otel-collector:4317" {
				t.Errorf("%s/%s: OTEL_EXPORTER_OTLP_ENDPOINT %+v", deployment, name, env)
			}
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "db-ca" && m.MountPath == "/etc/evalmeter/db-ca" }) {
				t.Errorf("%s/%s: mounts %v lack db-ca", deployment, name, c.VolumeMounts)
			}
		}
	}
}

// TestLowCreditThreshold: controller.lowCreditThreshold reaches the
// controller, 0 included.
func TestLowCreditThreshold(t *testing.T) {
	for values, want := range map[string]string{`{}`: "2", `{"controller": {"lowCreditThreshold": 0}}`: "0"} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(values), &v); err != nil {
			t.Fatal(err)
		}
		env := envVar(container(t, mustRender(t, v), "evalmeter-controller", "controller"), "EVALMETER_LOW_CREDIT_THRESHOLD")
		if env == nil || env.Value != want {
			t.Errorf("%s: EVALMETER_LOW_CREDIT_THRESHOLD %+v, want %s", values, env, want)
		}
	}
}

// TestPostgreSQLConnections: the max_connections of the bundled PostgreSQL
// (postgresql.maxConnections) and of the CloudNativePG Cluster
// (postgresql.cnpg.maxConnections) is the value's, and the chart refuses to
// render when the pods could open more connections than that (the sum in
// values.yaml).
func TestPostgreSQLConnections(t *testing.T) {
	modes := map[string]struct {
		key            string // of the values
		maxConnections func(objs []*unstructured.Unstructured) string
	}{
		"postgresql": {key: "postgresql", maxConnections: func(objs []*unstructured.Unstructured) string {
			var sts appsv1.StatefulSet
			object(t, objs, "StatefulSet", "evalmeter-postgresql", &sts)
			args := strings.Join(sts.Spec.Template.Spec.Containers[0].Args, " ")
			return strings.TrimPrefix(args, "-c max_connections=")
		}},
		"postgresql.cnpg": {key: "cnpg", maxConnections: func(objs []*unstructured.Unstructured) string {
			var cluster cnpgCluster
			object(t, objs, "Cluster", "evalmeter-db", &cluster)
			return cluster.Spec.PostgreSQL.Parameters["max_connections"]
		}},
	}
	for _, c := range []struct {
		name           string
		values         string // maxConnections is set in the mode's values when not 0
		maxConnections int
		want           string // max_connections, or
		fail           string // the render error, after "more than <mode>.maxConnections"
	}{
		{name: "defaults", values: `{}`, want: "100"},
		// (10 + 3) × 5 + (1 + 1) × 5 + 2 + 3 = 80
		{name: "autoscaling", values: `{api: {autoscaling: {enabled: true}}}`, want: "100"},
		// (10 + 3) × 10 + (1 + 1) × 10 + 2 + 3 = 155
		{name: "too many", values: `{database: {maxConns: 10}, api: {autoscaling: {enabled: true}}}`,
			fail: "pods can open 155 PostgreSQL connections at once (database.maxConns 10 each, see values.yaml), more than %s.maxConnections 100"},
		{name: "raised", values: `{database: {maxConns: 10}, api: {autoscaling: {enabled: true}}}`, maxConnections: 155, want: "155"},
		// (6 + 2) × 5 + (3 + 1) × 5 + 2 + 3 = 65
		{name: "replicas", values: `{api: {replicas: 6}, controller: {replicas: 3}}`, maxConnections: 64,
			fail: "pods can open 65 PostgreSQL connections at once (database.maxConns 5 each, see values.yaml), more than %s.maxConnections 64"},
	} {
		for mode, m := range modes {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(c.values), &v); err != nil {
				t.Fatal(err)
			}
			pg := map[string]any{"enabled": true}
			if c.maxConnections != 0 {
				pg["maxConnections"] = c.maxConnections
			}
			if m.key == "cnpg" {
				pg = map[string]any{"cnpg": pg}
			}
			v["postgresql"] = pg
			objs, err := render(v, "evalmeter")
			fail := ""
			if c.fail != "" {
				fail = fmt.Sprintf(c.fail, mode)
			}
			switch {
			case fail != "" && (err == nil || !strings.Contains(err.Error(), fail)):
				t.Errorf("%s, %s: rendered (%v), want the error %q", c.name, mode, err, fail)
			case fail == "" && err != nil:
				t.Errorf("%s, %s: %v", c.name, mode, err)
			case fail == "" && m.maxConnections(objs) != c.want:
				t.Errorf("%s, %s: max_connections is %q, want %q", c.name, mode, m.maxConnections(objs), c.want)
			}
		}
	}
}

// TestSecretMounts: the token secrets and the serving certificate are whole
// Secret volumes, mounted read-only without subPath, which the kubelet
// updates in place (subPath mounts never change); the previous token secret
// is a file like the current one.
func TestSecretMounts(t *testing.T) {
	objs := mustRender(t, map[string]any{
		"tokenSecret": map[string]any{"existingSecret": "token-2", "existingSecretKey": "key",
			"previousExistingSecret": "token-1", "previousExistingSecretKey": "old-key"},
		"api": map[string]any{"tlsSecret": "evalmeter-tls"},
	})
	var d appsv1.Deployment
	object(t, objs, "Deployment", "evalmeter-api", &d)
	api := container(t, objs, "evalmeter-api", "api")
	secrets := map[string]string{} // volume: Secret
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	mounts := map[string]string{} // Secret: directory
	for _, m := range api.VolumeMounts {
		secret, ok := secrets[m.Name]
		if !ok {
			continue
		}
		if m.SubPath != "" || m.SubPathExpr != "" || !m.ReadOnly {
			t.Errorf("Secret %s is mounted %+v, want read-only and without subPath", secret, m)
		}
		mounts[secret] = m.MountPath
	}
	want := map[string]string{
		"token-2":               "/var/run/evalmeter/token",
		"token-1":               "/var/run/evalmeter/token-previous",
		"evalmeter-tls":         "/var/run/evalmeter/tls",
		"evalmeter-receipt-key": "/var/run/evalmeter/receipt-key",
	}
	if !equality.Semantic.DeepEqual(mounts, want) {
		t.Errorf("Secrets mounted at %v, want %v", mounts, want)
	}
	for _, want := range []string{"--token-secret-file=/var/run/evalmeter/token/key",
		"--tls-cert=/var/run/evalmeter/tls/tls.crt", "--tls-key=/var/run/evalmeter/tls/tls.key"} {
		if !slices.Contains(api.Args, want) {
			t.Errorf("the API's arguments %q lack %s", api.Args, want)
		}
	}
	if env := envVar(api, "EVALMETER_TOKEN_SECRET_PREVIOUS_FILE"); env == nil || env.Value != "/var/run/evalmeter/token-previous/old-key" {
		t.Errorf("EVALMETER_TOKEN_SECRET_PREVIOUS_FILE is %+v, want the file of key old-key", env)
	}
	if env := envVar(api, "EVALMETER_TOKEN_SECRET_PREVIOUS"); env != nil {
		t.Errorf("the previous secret is in the environment: %+v", env)
	}

	// Without a previous secret, neither its file nor its volume.
	api = container(t, mustRender(t, map[string]any{}), "evalmeter-api", "api")
	if env := envVar(api, "EVALMETER_TOKEN_SECRET_PREVIOUS_FILE"); env != nil {
		t.Errorf("no previous secret, but %+v", env)
	}
	for _, m := range api.VolumeMounts {
		if m.Name == "token-previous" {
			t.Errorf("no previous secret, but a mount %+v", m)
		}
	}
}

// TestGOMEMLIMIT: the API and the controller run with GOMEMLIMIT at 90% of
// their memory limit, or the limit itself from the downward API when the
// values give none.
func TestGOMEMLIMIT(t *testing.T) {
	for _, limit := range []any{nil, "1Gi", "1.5Gi", "512M", "1e9", 268435456} {
		resources := map[string]any{"limits": map[string]any{"memory": limit}}
		objs := mustRender(t, map[string]any{"api": map[string]any{"resources": resources}, "controller": map[string]any{"resources": resources}})
		for deployment, name := range map[string]string{"evalmeter-api": "api", "evalmeter-controller": "controller"} {
			c := container(t, objs, deployment, name)
			env := envVar(c, "GOMEMLIMIT")
			switch {
			case env == nil:
				t.Errorf("%v: %s has no GOMEMLIMIT", limit, name)
			case limit == nil:
				want := &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: name, Resource: "limits.memory"}}
				if !equality.Semantic.DeepEqual(env.ValueFrom, want) || c.Resources.Limits.Memory().Value() != 0 {
					t.Errorf("no memory limit: %s has GOMEMLIMIT %+v, want from the downward API", name, env)
				}
			default:
				bytes := c.Resources.Limits.Memory().Value()
				if want := fmt.Sprint(bytes * 9 / 10); env.Value != want || bytes == 0 {
					t.Errorf("%v: %s has GOMEMLIMIT %q, want 90%% of %d bytes: %s", limit, name, env.Value, bytes, want)
				}
			}
		}
	}
}

// TestKubeVersionFloor: CRD field selectors (selectableFields, for
// spec.clientID) are on by default from Kubernetes 1.31; on 1.30 the API
// server drops them from the CRD. The chart refuses older clusters.
func TestKubeVersionFloor(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	readYAML(t, "evalmeter/files/evalmeter.io_clientagreements.yaml", &crd)
	if len(crd.Spec.Versions[0].SelectableFields) == 0 {
		t.Fatal("the CRD has no selectableFields: this floor may be lowered")
	}
	for _, v := range []string{"v1.30.14", "v1.30.14-eks-931bdca", "v1.31.0", "v1.31.1-gke.1146000", "v1.36.3"} {
		_, err := renderFor(v, map[string]any{}, "evalmeter")
		below := strings.HasPrefix(v, "v1.30.")
		switch {
		case below && (err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion: >=1.31.0-0 which is incompatible with Kubernetes "+v)):
			t.Errorf("%s: rendered (%v), want the chart's kubeVersion error", v, err)
		case !below && err != nil:
			t.Errorf("%s: %v", v, err)
		}
	}
}

// TestReceiptKey: by default the chart generates an Ed25519 key the API
// reads, and signs under the ingress's URL; a named Secret, retired keys, a
// public URL of one's own and receipts off each render as they say.
func TestReceiptKey(t *testing.T) {
	objs := mustRender(t, map[string]any{"ingress": map[string]any{"enabled": true, "host": "metrics.example.com", "tlsSecret": "tls"}})
	var secret corev1.Secret
	object(t, objs, "Secret", "evalmeter-receipt-key", &secret)
	key, err := receipt.ParsePrivateKey(secret.Data["key.pem"])
	if err != nil {
		t.Fatalf("the generated key: %v\n%s", err, secret.Data["key.pem"])
	}
	if secret.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the receipt key Secret is not kept by helm uninstall: %v", secret.Annotations)
	}
	if !strings.Contains(string(secret.Data["key.pem"]), "BEGIN PRIVATE KEY") || key == nil {
		t.Errorf("not a PEM PKCS#8 key: %s", secret.Data["key.pem"])
	}
	var ing networkingv1.Ingress
	object(t, objs, "Ingress", "evalmeter", &ing)
	var paths []string
	for _, p := range ing.Spec.Rules[0].HTTP.Paths {
		paths = append(paths, string(*p.PathType)+" "+p.Path)
	}
	if !slices.Equal(paths, []string{"Prefix /api/svc/v1/", "Exact /.well-known/evalmeter/receipt-keys.json"}) {
		t.Errorf("the Ingress routes %q; third parties need the receipt keys", paths)
	}
	api := container(t, objs, "evalmeter-api", "api")
	for name, want := range map[string]string{
		"EVALMETER_RECEIPT_KEY_FILE": "/var/run/evalmeter/receipt-key/key.pem",
		"EVALMETER_PUBLIC_URL":       "https://metrics.example.com",
	} {
		if env := envVar(api, name); env == nil || env.Value != want {
			t.Errorf("%s is %+v, want %s", name, env, want)
		}
	}

	objs = mustRender(t, map[string]any{"receipts": map[string]any{
		"existingSecret": "receipts-2026", "existingSecretKey": "ed25519.pem",
		"retiredKeysSecret": "receipts-retired", "publicURL": "https://evalmeter.example.com/v1",
	}})
	for _, o := range objs {
		if o.GetKind() == "Secret" && o.GetName() == "evalmeter-receipt-key" {
			t.Error("a receipt key was generated beside existingSecret")
		}
	}
	var d appsv1.Deployment
	object(t, objs, "Deployment", "evalmeter-api", &d)
	volumes := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			volumes[v.Name] = v.Secret.SecretName
		}
	}
	if volumes["receipt-key"] != "receipts-2026" || volumes["receipt-retired"] != "receipts-retired" {
		t.Errorf("volumes %v", volumes)
	}
	api = container(t, objs, "evalmeter-api", "api")
	for name, want := range map[string]string{
		"EVALMETER_RECEIPT_KEY_FILE":          "/var/run/evalmeter/receipt-key/ed25519.pem",
		"EVALMETER_RECEIPT_RETIRED_KEYS_FILE": "/var/run/evalmeter/receipt-retired/retired.pem",
		"EVALMETER_PUBLIC_URL":                "https://evalmeter.example.com/v1",
	} {
		if env := envVar(api, name); env == nil || env.Value != want {
			t.Errorf("%s is %+v, want %s", name, env, want)
		}
	}

	objs = mustRender(t, map[string]any{"receipts": map[string]any{"enabled": false}})
	api = container(t, objs, "evalmeter-api", "api")
	for _, name := range []string{"EVALMETER_RECEIPT_KEY_FILE", "EVALMETER_PUBLIC_URL"} {
		if env := envVar(api, name); env != nil {
			t.Errorf("receipts off, but %+v", env)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Secret" && o.GetName() == "evalmeter-receipt-key" {
			t.Error("receipts off, but a receipt key was generated")
		}
	}
}
