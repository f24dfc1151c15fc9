//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// The restore drill's load and schedule.
const (
	drCredits = 5000 // more than the load can spend: every open is a 201
	// The load runs this long after the base backup before the target T,
	// then this long after T (WAL with commits past T, which recovery needs
	// to know it reached T).
	drBeforeTarget, drAfterTarget = 20 * time.Second, 10 * time.Second
	drOpenEvery                   = 50 * time.Millisecond // a new session key this often

	drCluster  = "evalmeter-db"          // the chart's Cluster, release evalmeter
	drRestored = "evalmeter-db-restored" // the Cluster the restore makes
	drBucket   = "evalmeter-dr"
)

// TestDR is the restore drill of make test-e2e-dr, on the kind cluster
// hack/e2e.sh made with CloudNativePG's operator and the Barman Cloud plugin
// installed. It deploys versitygw (an S3-compatible store), installs the
// chart with postgresql.cnpg.backup on (WAL archiving into versitygw), puts
// customer load on the API (session opens with Idempotency-Keys, metrics
// posts, replays, each recorded client-side), takes a base backup, notes a
// target time T under load, makes sure the WAL past T is archived, then runs a
// destructive DELETE on the ledger. It restores a new Cluster to T with one
// helm upgrade (postgresql.cnpg.clusterName, recovery), points the API at it,
// and checks the ledger against the client's record split at T
// (checkRestore). It prints the recovery time (helm upgrade to the API
// answering from the restored ledger) and the recovery point.
//
// E2E_DR_TARGET=after-delete is the mutation check: T is taken after the
// DELETE, so the restore brings the damage back, and the test passes only if
// the checker reports the lost sessions.
func TestDR(t *testing.T) {
	e := newKindEnv(t)
	mutation := os.Getenv("E2E_DR_TARGET")
	if mutation != "" && mutation != "after-delete" {
		t.Fatalf("E2E_DR_TARGET=%q: empty (a target before the DELETE) or after-delete (the mutation check)", mutation)
	}
	versitygw := os.Getenv("E2E_VERSITYGW_IMAGE")
	if versitygw == "" {
		t.Fatal("E2E_VERSITYGW_IMAGE must name versitygw's image: run make test-e2e-dr (hack/e2e.sh)")
	}
	const ns = "evalmeter"
	kubectl := func(args ...string) string { t.Helper(); return e.run(t, nil, e.kubectl, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, e, ns,
				[]string{"-n", ns, "get", "clusters.postgresql.cnpg.io,backups.postgresql.cnpg.io,objectstores.barmancloud.cnpg.io", "-o", "yaml"},
				[]string{"-n", ns, "logs", "-l", "cnpg.io/podRole=instance", "-c", "plugin-barman-cloud", "--tail=40", "--prefix"},
				[]string{"-n", ns, "logs", "-l", "app=versitygw", "--tail=40"},
				[]string{"-n", "cnpg-system", "logs", "deployment/cnpg-controller-manager", "--tail=60"},
				[]string{"-n", "cnpg-system", "logs", "deployment/barman-cloud", "--tail=60"})
		}
	})

	// The object store: versitygw in the cluster, its root credentials in a
	// Secret that the ObjectStore reads too.
	kubectl("create", "namespace", ns)
	accessKey, secretKey := randomHex(t, 10), randomHex(t, 20)
	kubectl("-n", ns, "create", "secret", "generic", "dr-s3",
		"--from-literal=ACCESS_KEY_ID="+accessKey, "--from-literal=ACCESS_SECRET_KEY="+secretKey)
	e.run(t, []byte(versitygwManifest(versitygw)), e.kubectl, "-n", ns, "apply", "-f", "-")
	kubectl("-n", ns, "rollout", "status", "deployment/versitygw", "--timeout=3m")

	// helm install: one PostgreSQL instance (asynchronous: no standby to
	// wait for), backed up to versitygw.
	certFile, keyFile, roots := selfSignedCert(t, "127.0.0.1", "localhost")
	kubectl("-n", ns, "create", "secret", "tls", "evalmeter-tls", "--cert", certFile, "--key", keyFile)
	values := loadValues(e, ns, e.image, true,
		"--set", "postgresql.cnpg.instances=1", "--set", "postgresql.cnpg.synchronous.number=0",
		"--set", "postgresql.cnpg.backup.enabled=true",
		"--set-string", "postgresql.cnpg.backup.destinationPath=s3://"+drBucket+"/ledger",
		"--set-string", "postgresql.cnpg.backup.endpointURL=http://versitygw."+ns+".svc:7070",
		"--set-string", "postgresql.cnpg.backup.s3Credentials.existingSecret=dr-s3")
	chart := filepath.Join(repo, "charts", "evalmeter")
	start := time.Now()
	e.run(t, nil, e.helm, append([]string{"install", "evalmeter", chart}, values...)...)
	t.Logf("helm install --wait: %s", time.Since(start).Round(time.Second))
	db := cnpgCluster{e: e, ns: ns, name: drCluster, instances: 1}
	db.waitHealthy(t, "the Cluster after helm install", func(string) bool { return true })
	db.waitArchived(t, db.switchWAL(t))

	apiKey := loadAgreement(t, e, ns, "dr-e2e", "PO-DR-1", drCredits)
	c, _ := newLoadClient(t, e, roots)
	svc := endpoint{url: c.url, client: c.client}
	// The load, until it is stopped: a new session key every drOpenEvery,
	// replays of acknowledged opens, metrics posts.
	l := startLoad(c, apiKey, loadShape{
		prefix: "dr-e2e", openEvery: drOpenEvery, resolveWithin: 15 * time.Minute, metrics: exampleRequest(t),
		openers: 3, replayers: 1, posters: 2,
	})
	defer l.stop()

	// A base backup under load, on demand, as an operator would take one.
	time.Sleep(5 * time.Second)
	backupStart := time.Now()
	e.run(t, []byte(fmt.Sprintf(`apiVersion: postgresql.cnpg.io/v1
kind: Backup
metadata:
  name: dr-e2e-base
spec:
  cluster:
    name: %s
  method: plugin
  pluginConfiguration:
    name: barman-cloud.cloudnative-pg.io
`, drCluster)), e.kubectl, "-n", ns, "apply", "-f", "-")
	polltest.Until(t, 5*time.Minute, "the base backup completed", func() error {
		out, err := e.output("-n", ns, "get", "backups.postgresql.cnpg.io", "dr-e2e-base", "-o", "jsonpath={.status.phase} {.status.error}")
		if err != nil || strings.TrimSpace(out) != "completed" {
			return fmt.Errorf("phase and error %q (%v)", out, err)
		}
		return nil
	})
	t.Logf("base backup under load: completed in %s", time.Since(backupStart).Round(time.Second))

	// The target T: a whole second (PostgreSQL reads it to the second as
	// given), with load on both sides of it; then the WAL past it archived.
	time.Sleep(drBeforeTarget)
	target := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(target))
	time.Sleep(drAfterTarget)
	db.waitArchived(t, db.switchWAL(t))
	time.Sleep(2 * time.Second)
	l.stop()
	h := c.h.all()
	before := db.ledger(t, "dr-e2e")
	t.Logf("load: %d requests; before the DELETE the ledger holds %d sessions and %d metrics requests; target %s",
		len(h), len(before.sessions), len(before.metricsKeys), target.Format(time.RFC3339))

	// The disaster: a superuser's DELETE of every session, charge and
	// metrics request (triggers, the append-only one and the foreign keys'
	// included, switched off for it).
	db.psql(t, `BEGIN;
SET LOCAL session_replication_role = replica;
DELETE FROM metrics_requests;
DELETE FROM credit_events WHERE kind = 'session';
DELETE FROM sessions;
UPDATE clients SET consumed_hours = 0;
COMMIT;`)
	deleted := time.Now()
	if l := db.ledger(t, "dr-e2e"); len(l.sessions) != 0 || l.consumed != 0 {
		t.Fatalf("after the DELETE: %d sessions, %d consumed", len(l.sessions), l.consumed)
	}
	if mutation == "after-delete" {
		time.Sleep(time.Until(deleted.Truncate(time.Second).Add(2 * time.Second)))
		target = deleted.Truncate(time.Second).Add(time.Second)
		// A commit after the target, so that recovery sees it reached it.
		db.psql(t, "UPDATE clients SET updated_at = now() WHERE client_id = 'dr-e2e'")
		db.waitArchived(t, db.switchWAL(t))
		t.Logf("mutation check: target %s, after the DELETE at %s", target.Format(time.RFC3339), deleted.Format(timeMicro))
	}

	// The restore: one helm upgrade, into a new Cluster; the damaged one is
	// kept.
	restoreStart := time.Now()
	e.run(t, nil, e.helm, append([]string{"upgrade", "evalmeter", chart}, append(values,
		"--set-string", "postgresql.cnpg.clusterName="+drRestored,
		"--set", "postgresql.cnpg.recovery.enabled=true",
		"--set-string", "postgresql.cnpg.recovery.serverName="+drCluster,
		"--set-string", "postgresql.cnpg.recovery.targetTime="+target.UTC().Format(time.RFC3339))...)...)
	upgraded := time.Since(restoreStart)
	// Answering from the restored ledger: no API pod left on the damaged
	// Cluster, and the client's balance (GET /usage, which writes nothing)
	// the restored ledger's.
	restored := cnpgCluster{e: e, ns: ns, name: drRestored, instances: 1}
	restored.waitHealthy(t, "the restored Cluster", func(string) bool { return true })
	state := restored.ledger(t, "dr-e2e")
	polltest.Until(t, 5*time.Minute, "the API answering from the restored ledger", func() error {
		out, err := e.output("-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=api", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].env[?(@.name=="DATABASE_URL")].valueFrom.secretKeyRef.name}{"\n"}{end}`)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasSuffix(line, " "+drRestored+"-app") {
				return fmt.Errorf("API pods and their database Secrets:\n%s", out)
			}
		}
		status, body, err := request(svc.client, "GET", svc.url+"/usage", apiKey, "", nil)
		if err != nil {
			return err
		}
		var usage api.UsageEnvelope
		if status != 200 || json.Unmarshal(body, &usage) != nil || usage.Usage.ConsumedHours != state.consumed {
			return fmt.Errorf("GET /usage: %d %s, want consumed_hours %d", status, body, state.consumed)
		}
		return nil
	})
	recovery := time.Since(restoreStart)
	point, behind := "none", "-"
	if p := recoveryPoint(h, state, target); !p.IsZero() {
		point, behind = p.Format(timeMicro), target.Sub(p).Round(time.Millisecond).String()
	}
	// The newest record the restored ledger holds, by the API's own clock.
	newest := strings.TrimSpace(restored.psql(t, `SELECT to_char(greatest((SELECT max(issued_at) FROM sessions),
  (SELECT max(created_at) FROM metrics_requests)) AT TIME ZONE 'UTC', 'HH24:MI:SS.US')`))
	if newest == "" {
		newest = "none"
	}
	t.Logf("recovery time %s (helm upgrade --wait %s, then the API answering from the restored ledger); recovery point: target %s, "+
		"the last acknowledged request the restored ledger holds ended %s before it (at %s; its newest record is of %s); "+
		"restored: %d sessions, %d metrics requests, %d consumed (before the DELETE: %d sessions)",
		recovery.Round(100*time.Millisecond), upgraded.Round(100*time.Millisecond), target.Format(time.RFC3339),
		behind, point, newest,
		len(state.sessions), len(state.metricsKeys), state.consumed, len(before.sessions))

	problems := checkRestore(h, state, target)
	problems = append(problems, restored.consumedMismatches(t)...)
	if mutation != "" {
		mutation = "restored to after the DELETE"
	}
	if judge(t, problems, mutation, func(p string) bool { return strings.Contains(p, " lost: ") }) {
		return
	}
	if len(state.sessions) == 0 || len(state.metricsKeys) == 0 {
		t.Errorf("the restored ledger holds %d sessions and %d metrics requests: the drill restored nothing to check", len(state.sessions), len(state.metricsKeys))
	}
}

// versitygwManifest is versitygw's Deployment and Service, serving S3 on
// port 7070 from an emptyDir (objects are files: the posix backend), with
// the root credentials of the Secret dr-s3.
func versitygwManifest(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: versitygw
spec:
  replicas: 1
  selector:
    matchLabels: {app: versitygw}
  template:
    metadata:
      labels: {app: versitygw}
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        fsGroup: 65532
      containers:
      - name: versitygw
        image: %s
        imagePullPolicy: IfNotPresent
        args: [posix, /data]
        env:
        - name: ROOT_ACCESS_KEY_ID
          valueFrom: {secretKeyRef: {name: dr-s3, key: ACCESS_KEY_ID}}
        - name: ROOT_SECRET_ACCESS_KEY
          valueFrom: {secretKeyRef: {name: dr-s3, key: ACCESS_SECRET_KEY}}
        ports:
        - {name: s3, containerPort: 7070}
        readinessProbe:
          tcpSocket: {port: s3}
          periodSeconds: 2
        volumeMounts:
        - {name: data, mountPath: /data}
      volumes:
      - name: data
        emptyDir: {}
---
apiVersion: v1
kind: Service
metadata:
  name: versitygw
spec:
  selector: {app: versitygw}
  ports:
  - {name: s3, port: 7070, targetPort: s3}
`, image)
}

// switchWAL closes the primary's current WAL segment (pg_switch_wal) and
// returns the name of the segment it closed, which holds every commit so far.
func (c cnpgCluster) switchWAL(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(c.psql(t, "SELECT pg_walfile_name(pg_switch_wal())"))
}

// waitArchived waits until the primary reports segment archived (segment
// names sort in WAL order on one timeline).
func (c cnpgCluster) waitArchived(t *testing.T, segment string) {
	t.Helper()
	start := time.Now()
	polltest.Until(t, 3*time.Minute, "WAL segment "+segment+" archived", func() error {
		out := strings.TrimSpace(c.psql(t, "SELECT coalesce(last_archived_wal, ''), failed_count, coalesce(last_failed_wal, '') FROM pg_stat_archiver"))
		if last, _, _ := strings.Cut(out, "|"); last < segment {
			return fmt.Errorf("last archived, failures, last failed: %s", out)
		}
		return nil
	})
	t.Logf("WAL segment %s archived in %s", segment, time.Since(start).Round(100*time.Millisecond))
}

// consumedMismatches: every client's consumed_hours equals its sessions and
// its session credit events.
func (c cnpgCluster) consumedMismatches(t *testing.T) []string {
	t.Helper()
	var problems []string
	out := c.psql(t, `SELECT c.client_id, c.consumed_hours,
  (SELECT count(*) FROM sessions s WHERE s.client_id = c.client_id),
  (SELECT count(*) FROM credit_events e WHERE e.client_id = c.client_id AND e.kind = 'session')
FROM clients c ORDER BY 1`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			problems = append(problems, "clients: unexpected row "+line)
			continue
		}
		consumed, _ := strconv.Atoi(f[1])
		sessions, _ := strconv.Atoi(f[2])
		events, _ := strconv.Atoi(f[3])
		if consumed != sessions || consumed != events {
			problems = append(problems, fmt.Sprintf("client %s: consumed_hours %d, %d sessions, %d session credit events", f[0], consumed, sessions, events))
		}
	}
	return problems
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
