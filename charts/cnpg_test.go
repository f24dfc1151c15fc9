package charts

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/evalmeter/evalmeter/internal/charttest"
)

// installCloudNativePGCRDs installs the CRDs of CloudNativePG's release
// manifest (hack/cnpg-manifest.sh: the version make test-e2e-ha runs) and of
// the Barman Cloud plugin's (hack/barman-cloud-manifest.sh: its ObjectStore)
// into the test's API server, so that dry runs check the chart's Cluster,
// ScheduledBackup and ObjectStore against their real schemas.
func installCloudNativePGCRDs() error {
	if err := installManifestCRDs("cnpg-manifest.sh", "postgresql.cnpg.io", "Cluster"); err != nil {
		return err
	}
	return installManifestCRDs("barman-cloud-manifest.sh", "barmancloud.cnpg.io", "ObjectStore")
}

// installManifestCRDs installs the CRDs of the manifest whose path hack/SCRIPT
// prints, one of which must be group's kind.
func installManifestCRDs(script, group, kind string) error {
	out, err := exec.Command(filepath.Join("..", "hack", script)).Output()
	if err != nil {
		return fmt.Errorf("hack/%s: %w", script, err)
	}
	crds, err := envtest.InstallCRDs(testEnv.Config, envtest.CRDInstallOptions{Paths: []string{strings.TrimSpace(string(out))}})
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if crd.Spec.Names.Kind == kind && crd.Spec.Group == group {
			return nil
		}
	}
	return fmt.Errorf("hack/%s's manifest installed %d CRDs, none of them %s's %s", script, len(crds), group, kind)
}

// cnpgCluster is the part of a CloudNativePG Cluster the chart decides.
type cnpgCluster struct {
	Spec struct {
		Instances  int    `json:"instances"`
		ImageName  string `json:"imageName"`
		PostgreSQL struct {
			Parameters  map[string]string `json:"parameters"`
			Synchronous struct {
				Method         string `json:"method"`
				Number         int    `json:"number"`
				DataDurability string `json:"dataDurability"`
				FailoverQuorum bool   `json:"failoverQuorum"`
			} `json:"synchronous"`
		} `json:"postgresql"`
		PrimaryLease struct {
			LeaseDurationSeconds int `json:"leaseDurationSeconds"`
			RenewDeadlineSeconds int `json:"renewDeadlineSeconds"`
			RetryPeriodSeconds   int `json:"retryPeriodSeconds"`
		} `json:"primaryLease"`
		Bootstrap struct {
			InitDB struct {
				Database string `json:"database"`
				Owner    string `json:"owner"`
			} `json:"initdb"`
		} `json:"bootstrap"`
		Storage struct {
			Size         string `json:"size"`
			StorageClass string `json:"storageClass"`
		} `json:"storage"`
	} `json:"spec"`
}

// TestCloudNativePG: with postgresql.cnpg.enabled the chart renders a
// Cluster with synchronous replication that an acknowledged write survives
// the primary's loss with (dataDurability required), and every process that
// connects (the API, its migrations, the controller) takes the owner's URL
// from the Cluster's -app Secret and verifies the server against the
// Cluster's CA, of which only the certificate is mounted.
func TestCloudNativePG(t *testing.T) {
	objs := mustRender(t, valueSets["cloudnativepg"])
	var cluster cnpgCluster
	object(t, objs, "Cluster", "evalmeter-db", &cluster)
	spec := cluster.Spec
	if spec.Instances != 3 || spec.PostgreSQL.Synchronous.Number != 1 || spec.PostgreSQL.Synchronous.DataDurability != "required" ||
		spec.PostgreSQL.Synchronous.Method != "any" || !spec.PostgreSQL.Synchronous.FailoverQuorum {
		t.Errorf("Cluster: %d instances, synchronous %+v; want 3, any 1, required, with a failover quorum", spec.Instances, spec.PostgreSQL.Synchronous)
	}
	// The lease a dead primary holds is most of a failover (docs/operator.md).
	if l := spec.PrimaryLease; l.LeaseDurationSeconds != 6 || l.RenewDeadlineSeconds != 4 || l.RetryPeriodSeconds != 1 {
		t.Errorf("Cluster primaryLease %+v, want 6 s, renewed within 4, retried every 1", l)
	}
	wantParameters := map[string]string{"max_connections": "100", "shared_buffers": "256MB", "log_min_duration_statement": "1000",
		"wal_retrieve_retry_interval": "1s"}
	if fmt.Sprint(spec.PostgreSQL.Parameters) != fmt.Sprint(wantParameters) {
		t.Errorf("Cluster parameters %v, want %v", spec.PostgreSQL.Parameters, wantParameters)
	}
	if spec.Bootstrap.InitDB.Database != "evalmeter" || spec.Bootstrap.InitDB.Owner != "evalmeter" ||
		spec.Storage.Size != "20Gi" || spec.Storage.StorageClass != "fast" || !strings.HasPrefix(spec.ImageName, "ghcr.io/cloudnative-pg/postgresql:15.") {
		t.Errorf("Cluster spec %+v", spec)
	}
	for _, kind := range []string{"StatefulSet", "PersistentVolumeClaim"} {
		for _, o := range objs {
			if o.GetKind() == kind {
				t.Errorf("the bundled PostgreSQL's %s %s rendered with postgresql.cnpg", kind, o.GetName())
			}
		}
	}
	checkDatabaseClient(t, objs, "evalmeter-db-app", "uri", "evalmeter-db-ca", "ca.crt")

	// The Cluster outlives helm uninstall, as the data of a ledger must.
	for _, o := range objs {
		if o.GetKind() == "Cluster" && o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("the Cluster's annotations %v lack helm.sh/resource-policy: keep", o.GetAnnotations())
		}
	}
}

// TestCloudNativePGClusterName: the Cluster's name keeps within
// CloudNativePG's 50 characters (its webhook refuses longer ones, which
// envtest, without the webhook, would not), and the chart refuses a release
// whose Cluster name would not be a DNS-1035 label.
func TestCloudNativePGClusterName(t *testing.T) {
	values := map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{"enabled": true}}}
	long := strings.Repeat("a", 53)
	objs, err := charttest.RenderRelease(chartDir, long, charttest.KubeVersion, "evalmeter", values)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Cluster" && (len(o.GetName()) > 50 || !strings.HasSuffix(o.GetName(), "-db")) {
			t.Errorf("release %s: Cluster %s (%d characters), want at most 50 ending in -db", long, o.GetName(), len(o.GetName()))
		}
	}
	if _, err := charttest.RenderRelease(chartDir, "1st", charttest.KubeVersion, "evalmeter", values); err == nil || !strings.Contains(err.Error(), "DNS-1035") {
		t.Errorf("release 1st: %v, want a DNS-1035 error", err)
	}
}

// TestExternalCloudNativePG: a Cluster the user runs is reached through
// database.existingSecret (its -app Secret, key uri) and database.caSecret
// (its -ca Secret): the same URL, CA mount and verification.
func TestExternalCloudNativePG(t *testing.T) {
	objs := mustRender(t, map[string]any{"database": map[string]any{
		"existingSecret": "ledger-app", "existingSecretKey": "uri", "caSecret": "ledger-ca",
	}})
	checkDatabaseClient(t, objs, "ledger-app", "uri", "ledger-ca", "ca.crt")

	// Without caSecret, neither the variables nor the volume.
	objs = mustRender(t, map[string]any{})
	for _, c := range []corev1.Container{
		container(t, objs, "evalmeter-api", "api"), container(t, objs, "evalmeter-api", "migrate"),
		container(t, objs, "evalmeter-controller", "controller"),
	} {
		if envVar(c, "PGSSLMODE") != nil || envVar(c, "PGSSLROOTCERT") != nil {
			t.Errorf("container %s sets libpq's TLS variables without a CA: %v", c.Name, c.Env)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "database-ca" {
				t.Errorf("container %s mounts a database CA without one: %+v", c.Name, m)
			}
		}
	}
}

// checkDatabaseClient: the API, the migrations and the controller take
// DATABASE_URL from secret's key and verify PostgreSQL's certificate
// (verify-full) with the CA in caSecret's caKey, mounted alone, read-only.
func checkDatabaseClient(t *testing.T, objs []*unstructured.Unstructured, secret, key, caSecret, caKey string) {
	t.Helper()
	for deployment, names := range map[string][]string{"evalmeter-api": {"api", "migrate"}, "evalmeter-controller": {"controller"}} {
		var d appsv1.Deployment
		object(t, objs, "Deployment", deployment, &d)
		var ca *corev1.SecretVolumeSource
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "database-ca" {
				ca = v.Secret
			}
		}
		if ca == nil || ca.SecretName != caSecret || len(ca.Items) != 1 || ca.Items[0].Key != caKey || ca.Items[0].Path != "ca.crt" {
			t.Errorf("%s: the database-ca volume is %+v, want the key %s of Secret %s only, as ca.crt", deployment, ca, caKey, caSecret)
		}
		for _, name := range names {
			c := container(t, objs, deployment, name)
			url := envVar(c, "DATABASE_URL")
			if url == nil || url.ValueFrom == nil || url.ValueFrom.SecretKeyRef == nil ||
				url.ValueFrom.SecretKeyRef.Name != secret || url.ValueFrom.SecretKeyRef.Key != key {
				t.Errorf("%s/%s: DATABASE_URL is %+v, want Secret %s key %s", deployment, name, url, secret, key)
			}
			if v := envVar(c, "PGSSLMODE"); v == nil || v.Value != "verify-full" {
				t.Errorf("%s/%s: PGSSLMODE is %+v, want verify-full", deployment, name, v)
			}
			if v := envVar(c, "PGSSLROOTCERT"); v == nil || v.Value != "/var/run/evalmeter/database-ca/ca.crt" {
				t.Errorf("%s/%s: PGSSLROOTCERT is %+v", deployment, name, v)
			}
			mounted := false
			for _, m := range c.VolumeMounts {
				if m.Name == "database-ca" {
					mounted = m.MountPath == "/var/run/evalmeter/database-ca" && m.ReadOnly && m.SubPath == ""
				}
			}
			if !mounted {
				t.Errorf("%s/%s: the database CA is not mounted read-only at /var/run/evalmeter/database-ca: %+v", deployment, name, c.VolumeMounts)
			}
		}
	}
}

// TestCloudNativePGRefused: values the chart cannot make a working ledger
// of fail at render time, each with an error that names the values to change.
func TestCloudNativePGRefused(t *testing.T) {
	for _, c := range []struct {
		name, values, fail string
	}{
		{name: "both databases", values: `{postgresql: {enabled: true, cnpg: {enabled: true}}}`,
			fail: "postgresql.enabled and postgresql.cnpg.enabled are exclusive"},
		{name: "no standby to wait for", values: `{postgresql: {cnpg: {enabled: true, instances: 1}}}`,
			fail: "postgresql.cnpg.instances 1 leaves fewer standbys than postgresql.cnpg.synchronous.number 1"},
		{name: "max_connections as a parameter", values: `{postgresql: {cnpg: {enabled: true, parameters: {max_connections: "500"}}}}`,
			fail: "set postgresql.cnpg.maxConnections"},
		{name: "synchronous_commit", values: `{postgresql: {cnpg: {enabled: true, parameters: {synchronous_commit: "local"}}}}`,
			fail: "synchronous_commit is refused"},
		{name: "a number for a parameter", values: `{postgresql: {cnpg: {enabled: true, parameters: {work_mem: 4096}}}}`, fail: "schema"},
		{name: "a digest without a tag", values: `{postgresql: {cnpg: {enabled: true, imageName: "ghcr.io/cloudnative-pg/postgresql@sha256:0000000000000000000000000000000000000000000000000000000000000000"}}}`,
			fail: "schema"},
		{name: "latest", values: `{postgresql: {cnpg: {enabled: true, imageName: "ghcr.io/cloudnative-pg/postgresql:latest"}}}`,
			fail: "schema"},
		{name: "unknown durability", values: `{postgresql: {cnpg: {enabled: true, synchronous: {number: 1, dataDurability: "eventual"}}}}`,
			fail: "schema"},
		{name: "a lease shorter than its renewal", values: `{postgresql: {cnpg: {enabled: true, primaryLease: {leaseDurationSeconds: 4, renewDeadlineSeconds: 4, retryPeriodSeconds: 1}}}}`,
			fail: "leaseDurationSeconds 4 must be greater than renewDeadlineSeconds 4"},
		{name: "no instance", values: `{postgresql: {cnpg: {enabled: true, instances: 0}}}`, fail: "schema"},
		{name: "unknown key", values: `{postgresql: {cnpg: {enabled: true, replicas: 3}}}`, fail: "schema"},
		{name: "bad CA Secret", values: `{database: {caSecret: "Ledger_CA"}}`, fail: "schema"},
	} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(c.values), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := render(v, "evalmeter"); err == nil || !strings.Contains(err.Error(), c.fail) {
			t.Errorf("%s: rendered (%v), want the error %q", c.name, err, c.fail)
		}
	}
	// A registry with a port, and a tag with a digest, are images too.
	for _, image := range []string{"registry.example.com:5000/postgresql:15.6",
		"ghcr.io/cloudnative-pg/postgresql:15.14-system-trixie@sha256:0000000000000000000000000000000000000000000000000000000000000000"} {
		if _, err := render(map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{"enabled": true, "imageName": image}}}, "evalmeter"); err != nil {
			t.Errorf("imageName %s: %v", image, err)
		}
	}

	// Without database.existingSecret, the schema accepts either PostgreSQL.
	for _, pg := range []string{`{enabled: true}`, `{cnpg: {enabled: true}}`} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(`{database: {existingSecret: ""}, postgresql: `+pg+`}`), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := render(v, "evalmeter"); err != nil {
			t.Errorf("postgresql %s without database.existingSecret: %v", pg, err)
		}
	}
}
