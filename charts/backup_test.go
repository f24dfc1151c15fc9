package charts

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// backupValues turn postgresql.cnpg.backup on, with every optional value set.
func backupValues() map[string]any {
	return map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{
		"enabled": true,
		"backup": map[string]any{
			"enabled":         true,
			"destinationPath": "s3://ledger-backups/evalmeter",
			"endpointURL":     "https://s3.example.com:9000",
			"endpointCA":      map[string]any{"secret": "s3-ca", "key": "ca.pem"},
			"s3Credentials":   map[string]any{"existingSecret": "ledger-s3", "regionKey": "REGION"},
			"retentionPolicy": "14d",
			"schedule":        "0 30 2 * * *",
		},
	}}}
}

// restoreValues are backupValues with a restore into the Cluster ledger-2 of
// the Cluster evalmeter-db's backups, to targetTime.
func restoreValues() map[string]any {
	return merged(backupValues(), map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{
		"clusterName": "ledger-2",
		"recovery":    map[string]any{"enabled": true, "serverName": "evalmeter-db", "targetTime": "2026-11-25T08:00:00Z"},
	}}})
}

// backupCluster is the part of a Cluster the backup values decide.
type backupCluster struct {
	Spec struct {
		Plugins []struct {
			Name          string            `json:"name"`
			IsWALArchiver bool              `json:"isWALArchiver"`
			Parameters    map[string]string `json:"parameters"`
		} `json:"plugins"`
		Bootstrap struct {
			InitDB *struct {
				Database string `json:"database"`
			} `json:"initdb"`
			Recovery *struct {
				Source         string `json:"source"`
				Database       string `json:"database"`
				Owner          string `json:"owner"`
				RecoveryTarget struct {
					TargetTime string `json:"targetTime"`
				} `json:"recoveryTarget"`
			} `json:"recovery"`
		} `json:"bootstrap"`
		ExternalClusters []struct {
			Name   string `json:"name"`
			Plugin struct {
				Name       string            `json:"name"`
				Parameters map[string]string `json:"parameters"`
			} `json:"plugin"`
		} `json:"externalClusters"`
	} `json:"spec"`
}

const barmanCloudPlugin = "barman-cloud.cloudnative-pg.io"

// TestBackup: postgresql.cnpg.backup turns on, with one block of values, WAL
// archiving into an ObjectStore with the credentials of a Secret, a
// retention, and a ScheduledBackup; off, none of it renders.
func TestBackup(t *testing.T) {
	for _, o := range mustRender(t, valueSets["cloudnativepg"]) {
		if o.GetKind() == "ObjectStore" || o.GetKind() == "ScheduledBackup" {
			t.Errorf("%s %s rendered with backups off", o.GetKind(), o.GetName())
		}
	}
	var off backupCluster
	object(t, mustRender(t, valueSets["cloudnativepg"]), "Cluster", "evalmeter-db", &off)
	if len(off.Spec.Plugins) != 0 {
		t.Errorf("plugins %+v with backups off", off.Spec.Plugins)
	}

	objs := mustRender(t, backupValues())
	var cluster backupCluster
	object(t, objs, "Cluster", "evalmeter-db", &cluster)
	if p := cluster.Spec.Plugins; len(p) != 1 || p[0].Name != barmanCloudPlugin || !p[0].IsWALArchiver ||
		fmt.Sprint(p[0].Parameters) != "map[barmanObjectName:evalmeter-backup serverName:evalmeter-db]" {
		t.Errorf("Cluster plugins %+v, want the WAL archiver %s into evalmeter-backup as evalmeter-db", p, barmanCloudPlugin)
	}
	if cluster.Spec.Bootstrap.InitDB == nil || cluster.Spec.Bootstrap.Recovery != nil || len(cluster.Spec.ExternalClusters) != 0 {
		t.Errorf("Cluster bootstrap %+v, external clusters %+v: want initdb alone", cluster.Spec.Bootstrap, cluster.Spec.ExternalClusters)
	}

	var store struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	object(t, objs, "ObjectStore", "evalmeter-backup", &store)
	wantStore := `{"configuration":{"data":{"compression":"gzip"},"destinationPath":"s3://ledger-backups/evalmeter",` +
		`"endpointCA":{"key":"ca.pem","name":"s3-ca"},"endpointURL":"https://s3.example.com:9000",` +
		`"s3Credentials":{"accessKeyId":{"key":"ACCESS_KEY_ID","name":"ledger-s3"},"region":{"key":"REGION","name":"ledger-s3"},` +
		`"secretAccessKey":{"key":"ACCESS_SECRET_KEY","name":"ledger-s3"}},"wal":{"compression":"gzip"}},"retentionPolicy":"14d"}`
	if got := mustJSON(t, store.Spec); got != wantStore {
		t.Errorf("ObjectStore spec\n%s\nwant\n%s", got, wantStore)
	}
	if store.Metadata.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the ObjectStore is not kept on uninstall: a restore after helm uninstall needs it")
	}

	var scheduled struct {
		Spec map[string]any `json:"spec"`
	}
	object(t, objs, "ScheduledBackup", "evalmeter-db", &scheduled)
	wantScheduled := `{"backupOwnerReference":"self","cluster":{"name":"evalmeter-db"},"immediate":true,"method":"plugin",` +
		`"pluginConfiguration":{"name":"barman-cloud.cloudnative-pg.io"},"schedule":"0 30 2 * * *"}`
	if got := mustJSON(t, scheduled.Spec); got != wantScheduled {
		t.Errorf("ScheduledBackup spec\n%s\nwant\n%s", got, wantScheduled)
	}

	// Optional values left out, out of the ObjectStore.
	objs = mustRender(t, merged(backupValues(), map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{"backup": map[string]any{
		"endpointURL": "", "endpointCA": map[string]any{"secret": ""}, "s3Credentials": map[string]any{"regionKey": ""}, "compression": "",
	}}}}))
	object(t, objs, "ObjectStore", "evalmeter-backup", &store)
	for _, field := range []string{"endpointURL", "endpointCA", "region", "compression"} {
		if got := mustJSON(t, store.Spec); strings.Contains(got, `"`+field+`"`) {
			t.Errorf("ObjectStore %s without its value: %s", field, got)
		}
	}
}

// TestRestore: recovery restores into a new Cluster (clusterName) from the
// folder of the old one in the same ObjectStore, to targetTime, archives
// under the new name, and the API, its migrations and the controller follow
// the new Cluster's Secrets.
func TestRestore(t *testing.T) {
	objs := mustRender(t, restoreValues())
	for _, o := range objs {
		if o.GetKind() == "Cluster" && o.GetName() != "ledger-2" {
			t.Errorf("Cluster %s rendered, want ledger-2 only", o.GetName())
		}
	}
	var cluster backupCluster
	object(t, objs, "Cluster", "ledger-2", &cluster)
	spec := cluster.Spec
	r := spec.Bootstrap.Recovery
	if spec.Bootstrap.InitDB != nil || r == nil || r.Source != "origin" || r.Database != "evalmeter" || r.Owner != "evalmeter" ||
		r.RecoveryTarget.TargetTime != "2026-11-25T08:00:00Z" {
		t.Fatalf("Cluster bootstrap %+v, want a recovery of evalmeter from origin to 2026-11-25T08:00:00Z", spec.Bootstrap)
	}
	if e := spec.ExternalClusters; len(e) != 1 || e[0].Name != "origin" || e[0].Plugin.Name != barmanCloudPlugin ||
		fmt.Sprint(e[0].Plugin.Parameters) != "map[barmanObjectName:evalmeter-backup serverName:evalmeter-db]" {
		t.Errorf("externalClusters %+v, want origin: evalmeter-db's folder in evalmeter-backup", e)
	}
	if p := spec.Plugins; len(p) != 1 || p[0].Parameters["serverName"] != "ledger-2" {
		t.Errorf("plugins %+v: the restored Cluster must archive under its own name", p)
	}
	checkDatabaseClient(t, objs, "ledger-2-app", "uri", "ledger-2-ca", "ca.crt")
	var scheduled struct {
		Spec struct {
			Cluster struct {
				Name string `json:"name"`
			} `json:"cluster"`
		} `json:"spec"`
	}
	object(t, objs, "ScheduledBackup", "ledger-2", &scheduled)
	if scheduled.Spec.Cluster.Name != "ledger-2" {
		t.Errorf("the ScheduledBackup backs up %s, want ledger-2", scheduled.Spec.Cluster.Name)
	}

	// No targetTime: to the end of the archived WAL.
	objs = mustRender(t, merged(restoreValues(), map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{
		"recovery": map[string]any{"targetTime": ""}}}}))
	var latest backupCluster
	object(t, objs, "Cluster", "ledger-2", &latest)
	if r := latest.Spec.Bootstrap.Recovery; r == nil || r.RecoveryTarget.TargetTime != "" {
		t.Errorf("recovery without targetTime: %+v", r)
	}
}

// TestBackupRefused: backup and restore values that cannot work fail at
// render time, each naming what to set.
func TestBackupRefused(t *testing.T) {
	for _, c := range []struct {
		name, values, fail string
		withBackup         bool // values merged into backupValues
	}{
		{name: "no destination", values: `{postgresql: {cnpg: {enabled: true, backup: {enabled: true, s3Credentials: {existingSecret: s3}}}}}`,
			fail: "postgresql.cnpg.backup.destinationPath is required"},
		{name: "no credentials", values: `{postgresql: {cnpg: {enabled: true, backup: {enabled: true, destinationPath: "s3://b/p"}}}}`,
			fail: "postgresql.cnpg.backup.s3Credentials.existingSecret is required"},
		{name: "backups of the bundled PostgreSQL", values: `{postgresql: {enabled: true, cnpg: {backup: {enabled: true}}}}`,
			fail: "postgresql.cnpg.backup and postgresql.cnpg.recovery need postgresql.cnpg.enabled"},
		{name: "a restore without backups", values: `{postgresql: {cnpg: {enabled: true, clusterName: b, recovery: {enabled: true, serverName: a}}}}`,
			fail: "postgresql.cnpg.recovery.enabled needs postgresql.cnpg.backup.enabled"},
		{name: "a restore from nowhere", values: `{postgresql: {cnpg: {clusterName: b, recovery: {enabled: true}}}}`, withBackup: true,
			fail: "postgresql.cnpg.recovery.serverName is required"},
		{name: "a restore into the folder it reads", values: `{postgresql: {cnpg: {recovery: {enabled: true, serverName: evalmeter-db}}}}`, withBackup: true,
			fail: `postgresql.cnpg.recovery.serverName "evalmeter-db" is the folder the restored Cluster would archive into`},
		{name: "a restore archiving into the folder it reads", values: `{postgresql: {cnpg: {clusterName: b, backup: {serverName: a}, recovery: {enabled: true, serverName: a}}}}`,
			withBackup: true, fail: `postgresql.cnpg.recovery.serverName "a" is the folder`},
		{name: "not s3", values: `{postgresql: {cnpg: {backup: {destinationPath: "https://b/p"}}}}`, fail: "schema"},
		{name: "bad retention", values: `{postgresql: {cnpg: {backup: {retentionPolicy: "30 days"}}}}`, fail: "schema"},
		{name: "five-field cron", values: `{postgresql: {cnpg: {backup: {schedule: "0 3 * * *"}}}}`, fail: "schema"},
		{name: "target without a zone", values: `{postgresql: {cnpg: {recovery: {targetTime: "2026-11-25 08:00:00"}}}}`, fail: "schema"},
		{name: "uppercase cluster name", values: `{postgresql: {cnpg: {clusterName: Ledger}}}`, fail: "schema"},
		{name: "region as a value", values: `{postgresql: {cnpg: {backup: {s3Credentials: {region: eu-west-1}}}}}`, fail: "schema"},
		{name: "unknown compression", values: `{postgresql: {cnpg: {backup: {compression: zip}}}}`, fail: "schema"},
		{name: "unknown backup key", values: `{postgresql: {cnpg: {backup: {bucket: b}}}}`, fail: "schema"},
	} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(c.values), &v); err != nil {
			t.Fatal(err)
		}
		if c.withBackup {
			v = merged(backupValues(), v)
		}
		if _, err := render(v, "evalmeter"); err == nil || !strings.Contains(err.Error(), c.fail) {
			t.Errorf("%s: rendered (%v), want the error %q", c.name, err, c.fail)
		}
	}
}

// TestBackupServerSideDryRun sends the backup and restore objects, with
// the PodMonitor and the alerts, to the API server with CloudNativePG's,
// the Barman Cloud plugin's and prometheus-operator's CRDs installed.
func TestBackupServerSideDryRun(t *testing.T) {
	prometheusCRDs(t)
	for name, values := range map[string]map[string]any{
		"backup":  merged(monitoringValues(), backupValues()),
		"restore": merged(monitoringValues(), restoreValues()),
	} {
		t.Run(name, func(t *testing.T) {
			objs, kinds := dryRun(t, values, "chart-"+name, "monitoring")
			for _, kind := range []string{"Cluster", "ObjectStore", "ScheduledBackup", "PodMonitor", "PrometheusRule"} {
				if kinds[kind] != 1 {
					t.Errorf("%d %s rendered, want 1: %v", kinds[kind], kind, kinds)
				}
			}
			t.Logf("%d objects checked: %v", len(objs), kinds)
		})
	}
}

// TestCloudNativePGPodMonitor: with monitoring.serviceMonitor and
// postgresql.cnpg, a PodMonitor scrapes the Cluster's instances, which the
// backup alerts read, and follows clusterName.
func TestCloudNativePGPodMonitor(t *testing.T) {
	for _, c := range []struct {
		name    string
		values  map[string]any
		cluster string
	}{
		{name: "backup", values: merged(monitoringValues(), backupValues()), cluster: "evalmeter-db"},
		{name: "restore", values: merged(monitoringValues(), restoreValues()), cluster: "ledger-2"},
	} {
		var pm struct {
			Spec struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				Endpoints []map[string]any `json:"podMetricsEndpoints"`
			} `json:"spec"`
		}
		object(t, mustRender(t, c.values), "PodMonitor", c.cluster, &pm)
		if fmt.Sprint(pm.Spec.Selector.MatchLabels) != fmt.Sprintf("map[cnpg.io/cluster:%s cnpg.io/podRole:instance]", c.cluster) ||
			len(pm.Spec.Endpoints) != 1 || pm.Spec.Endpoints[0]["port"] != "metrics" {
			t.Errorf("%s: PodMonitor %+v, want the instances of %s, port metrics", c.name, pm.Spec, c.cluster)
		}
	}
	// Without monitoring, none.
	for _, o := range mustRender(t, backupValues()) {
		if o.GetKind() == "PodMonitor" {
			t.Errorf("PodMonitor %s rendered without monitoring.serviceMonitor", o.GetName())
		}
	}
}

// TestBackupAlertsOnlyWithBackups: the backup alerts render with backups on
// only, selecting the Cluster's pods by its name.
func TestBackupAlertsOnlyWithBackups(t *testing.T) {
	backupAlerts := []string{"EvalmeterBackupTooOld", "EvalmeterWALArchivingFailing", "EvalmeterWALArchivingStale"}
	for _, c := range []struct {
		name   string
		values map[string]any
		want   bool
	}{
		{name: "no backups", values: merged(monitoringValues(), map[string]any{"postgresql": map[string]any{"cnpg": map[string]any{"enabled": true}}})},
		{name: "backups", values: merged(monitoringValues(), backupValues()), want: true},
		{name: "restored", values: merged(monitoringValues(), restoreValues()), want: true},
	} {
		rule, _ := renderedRule(t, c.values)
		var found []string
		for _, g := range rule.Spec.Groups {
			for _, r := range g.Rules {
				if slices.Contains(backupAlerts, r.Alert) {
					found = append(found, r.Alert)
					cluster := "evalmeter-db"
					if c.name == "restored" {
						cluster = "ledger-2"
					}
					if !strings.Contains(r.Expr, `pod=~"`+cluster+`-[0-9]+"`) {
						t.Errorf("%s: %s selects %s", c.name, r.Alert, r.Expr)
					}
				}
			}
		}
		if c.want != (len(found) == len(backupAlerts)) || (!c.want && len(found) > 0) {
			t.Errorf("%s: backup alerts %v", c.name, found)
		}
	}
}

// cloudNativePGSeries are the series of CloudNativePG's instances that the
// backup alerts read, each with where its name comes from in CloudNativePG's
// or the Barman Cloud plugin's module (hack/cnpg-manifest.sh,
// hack/barman-cloud-manifest.sh): no evalmeter process exposes them.
var cloudNativePGSeries = map[string]struct {
	script, file string   // the module's file, relative to the manifest's directory
	evidence     []string // regular expressions the file matches, which make up the name
}{
	// The plugin's gauges: "barman_cloud_cloudnative_pg_io" is its name,
	// barman-cloud.cloudnative-pg.io, sanitized.
	"barman_cloud_cloudnative_pg_io_last_available_backup_timestamp": {script: "barman-cloud-manifest.sh",
		file: "internal/cnpgi/instance/metrics.go", evidence: []string{`buildFqName\("last_available_backup_timestamp"\)`}},
	// CloudNativePG's default queries (cnpg_<query>_<column>): in the
	// release manifest's cnpg-default-monitoring ConfigMap.
	"cnpg_pg_stat_archiver_last_failed_time": {script: "cnpg-manifest.sh",
		evidence: []string{`(?m)^\s+pg_stat_archiver:$`, `(?m)^\s+- last_failed_time:$`}},
	"cnpg_pg_stat_archiver_last_archived_time": {script: "cnpg-manifest.sh",
		evidence: []string{`(?m)^\s+pg_stat_archiver:$`, `(?m)^\s+- last_archived_time:$`}},
	"cnpg_pg_stat_archiver_seconds_since_last_archival": {script: "cnpg-manifest.sh",
		evidence: []string{`(?m)^\s+pg_stat_archiver:$`, `(?m)^\s+- seconds_since_last_archival:$`}},
	// The instance manager's collector (namespace cnpg, subsystem collector).
	"cnpg_collector_pg_wal_archive_status": {script: "cnpg-manifest.sh",
		file:     "../pkg/management/postgres/webserver/metricserver/pg_collector.go",
		evidence: []string{`subsystem := "collector"`, `Name:\s+"pg_wal_archive_status"`}},
}

// TestCloudNativePGSeriesNames: the names in cloudNativePGSeries are those
// the pinned CloudNativePG and plugin versions expose.
func TestCloudNativePGSeriesNames(t *testing.T) {
	for name, s := range cloudNativePGSeries {
		out, err := exec.Command(filepath.Join("..", "hack", s.script)).Output()
		if err != nil {
			t.Fatalf("hack/%s: %v", s.script, err)
		}
		path := strings.TrimSpace(string(out))
		if s.file != "" {
			path = filepath.Join(filepath.Dir(path), s.file)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, e := range s.evidence {
			if !regexp.MustCompile(e).Match(b) {
				t.Errorf("%s: %s does not match %s", name, path, e)
			}
		}
	}
}

// mustJSON is v as JSON, its keys sorted: a stable form to compare.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
