//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/polltest"
)

// The failover test's load and schedule.
const (
	haCredits  = 300
	haAttempts = 1000 // distinct Idempotency-Keys that try to open a session
	// The first haCredits+haSpare keys are first tried over this long, so
	// that sessions are charged through every fault; the others race for
	// the last credits right after.
	haOpenPeriod = 100 * time.Second
	haSpare      = 30
	// The load runs at least this long, and until every fault is over.
	haLoad = 120 * time.Second
	// A fault starts at this offset into the load, or when the previous one
	// is over if later.
	haFailoverAt, haSwitchoverAt, haAPIKillAt = 15 * time.Second, 50 * time.Second, 85 * time.Second
	// The unavailability window each fault should stay under on kind.
	haWindowTarget = 10 * time.Second
	// Past this, the service did not come back by itself: the test fails.
	haWindowLimit = 120 * time.Second

	haCluster = "evalmeter-db" // the chart's CloudNativePG Cluster, release evalmeter
)

// TestHA is a Jepsen-style test of the ledger on CloudNativePG, on the kind
// cluster hack/e2e.sh made with CloudNativePG's operator installed
// (make test-e2e-ha). It installs the chart with postgresql.cnpg.enabled and
// two API replicas, drives the API through its Service for about two
// minutes with concurrent session opens (more attempts than credits, each
// key retried until it gets a 201 or a 402), replays of acknowledged opens
// and metrics posts, and meanwhile:
//  1. deletes the primary's pod (a failover),
//  2. asks for a switchover,
//  3. kills the API pods one at a time.
//
// It then checks the ledger against the client's own record (checkLedger)
// and prints each fault's unavailability window.
//
// E2E_HA_ASYNC=1 is the mutation check: asynchronous replication, and the
// primary killed at once while its standbys are kept from streaming for a
// few seconds. The test should then find acknowledged sessions lost.
func TestHA(t *testing.T) {
	e := newKindEnv(t)
	async := os.Getenv("E2E_HA_ASYNC") == "1"
	const ns = "evalmeter"
	kubectl := func(args ...string) string { t.Helper(); return e.run(t, nil, e.kubectl, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, e, ns,
				[]string{"-n", ns, "get", "clusters.postgresql.cnpg.io", "-o", "yaml"},
				[]string{"-n", "cnpg-system", "logs", "deployment/cnpg-controller-manager", "--tail=60"})
		}
	})

	// helm install: the CloudNativePG Cluster, two API replicas behind a
	// node port, serving TLS.
	kubectl("create", "namespace", ns)
	certFile, keyFile, roots := selfSignedCert(t, "127.0.0.1", "localhost")
	kubectl("-n", ns, "create", "secret", "tls", "evalmeter-tls", "--cert", certFile, "--key", keyFile)
	install := append([]string{"install", "evalmeter", filepath.Join(repo, "charts", "evalmeter")}, loadValues(e, ns, e.image, true)...)
	if async {
		// PostgreSQL's default retry: holdStreaming keeps the standbys off.
		install = append(install, "--set", "postgresql.cnpg.synchronous.number=0",
			"--set-string", "postgresql.cnpg.parameters.wal_retrieve_retry_interval=5s")
	}
	start := time.Now()
	e.run(t, nil, e.helm, install...)
	t.Logf("helm install --wait: %s", time.Since(start).Round(time.Second))
	db := cnpgCluster{e: e, ns: ns, name: haCluster, instances: 3}
	db.waitHealthy(t, "the Cluster after helm install", func(string) bool { return true })
	standbys := strings.TrimSpace(db.psql(t, "SHOW synchronous_standby_names"))
	if sync := strings.HasPrefix(standbys, "ANY 1 "); sync == async {
		t.Fatalf("synchronous_standby_names = %q with E2E_HA_ASYNC=%t", standbys, async)
	}

	apiKey := loadAgreement(t, e, ns, "ha-e2e", "PO-HA-1", haCredits)
	example := exampleRequest(t)
	c, transport := newLoadClient(t, e, roots)

	// The load.
	l := startLoad(c, apiKey, loadShape{
		prefix: "ha-e2e", attempts: haAttempts, paced: haCredits + haSpare, period: haOpenPeriod,
		resolveWithin: haLoad + 4*time.Minute, metrics: example,
	})
	t0 := l.t0

	// The faults, one after the other.
	var faults []fault
	after := func(offset time.Duration) { time.Sleep(time.Until(t0.Add(offset))) }

	after(haFailoverAt)
	primary := db.primary(t)
	if async {
		db.holdStreaming(t, primary, 5*time.Second)
	}
	f := fault{name: "failover: primary " + primary + " deleted", start: time.Now()}
	if async {
		kubectl("-n", ns, "delete", "pod", primary, "--grace-period=0", "--force", "--wait=false")
	} else {
		kubectl("-n", ns, "delete", "pod", primary, "--grace-period=1", "--wait=false")
	}
	f.end = db.waitHealthy(t, f.name, func(p string) bool { return p != primary })
	f.promoted = db.promoted(t)
	faults = append(faults, f)

	after(haSwitchoverAt)
	target := db.standby(t)
	f = fault{name: "switchover to " + target, start: time.Now()}
	patch := fmt.Sprintf(`{"status":{"targetPrimary":%q,"targetPrimaryTimestamp":%q,"phase":"Switchover in progress","phaseReason":"Switching over to %s"}}`,
		target, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"), target)
	kubectl("-n", ns, "patch", "clusters.postgresql.cnpg.io", db.name, "--subresource=status", "--type=merge", "-p", patch)
	f.end = db.waitHealthy(t, f.name, func(p string) bool { return p == target })
	f.promoted = db.promoted(t)
	faults = append(faults, f)

	after(haAPIKillAt)
	for _, pod := range strings.Fields(kubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=api", "-o", "jsonpath={.items[*].metadata.name}")) {
		f = fault{name: "API pod " + pod + " killed", start: time.Now(), apiDown: true}
		kubectl("-n", ns, "delete", "pod", pod, "--grace-period=0", "--force", "--wait=false")
		// Kept-alive connections to the dead pod would fail after the fault.
		transport.CloseIdleConnections()
		polltest.Until(t, 5*time.Minute, "two API pods ready without "+pod, func() error {
			out := kubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=api", "-o",
				`jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].ready}{"\n"}{end}`)
			ready := 0
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				name, state, _ := strings.Cut(line, " ")
				if name == pod {
					return fmt.Errorf("%s is still there", pod)
				}
				if state == "true" {
					ready++
				}
			}
			if ready != 2 {
				return fmt.Errorf("%d API pods ready:\n%s", ready, out)
			}
			return nil
		})
		f.end = time.Now()
		faults = append(faults, f)
	}

	after(max(haLoad, time.Since(t0)+10*time.Second))
	end := l.stop()
	loadTime := end.Sub(t0)

	// Every acknowledged session, replayed once more: the same id and token.
	for _, s := range c.sessions() {
		untilAnswered(time.Now().Add(10*time.Second), func(attempt int) op { return c.openSession(apiKey, s.key, attempt, opReplay) })
	}

	h := c.h.all()
	state := db.ledger(t, "ha-e2e")
	t.Logf("load of %s against %s (synchronous replication: %t); the ledger: %d of %d credits consumed, %d sessions, %d metrics requests\n%s",
		loadTime.Round(time.Second), c.url, !async, state.consumed, state.allocated, len(state.sessions), len(state.metricsKeys), summary(h, faults, end))
	problems := checkLedger(h, state, haAttempts, faults)
	mutation := ""
	if async {
		mutation = "asynchronous replication and the primary killed"
	}
	if judge(t, problems, mutation, func(p string) bool {
		return strings.HasPrefix(p, "acknowledged session lost") || strings.Contains(p, ", the ledger has ")
	}) {
		return
	}
	for _, f := range figures(h, faults, end) {
		switch {
		case f.window >= haWindowLimit:
			t.Errorf("%s: unavailable for %s: the service did not come back by itself", f.name, f.window.Round(time.Second))
		case f.window >= haWindowTarget:
			t.Logf("%s: unavailable for %s, over the %s target", f.name, f.window.Round(time.Second), haWindowTarget)
		}
	}
}

// judge reports a checker's problems as the test's errors, the first few
// (a broken ledger breaks many promises at once: those say which), and
// reports whether mutation is set. In a mutation check (mutation names the
// fault injected), the fault should lose acknowledged writes: the test then
// fails only when no problem isLoss, and logs the first problems.
func judge(t *testing.T, problems []string, mutation string, isLoss func(problem string) bool) bool {
	t.Helper()
	if mutation != "" {
		lost := 0
		for _, p := range problems {
			if isLoss(p) {
				lost++
			}
		}
		if lost == 0 {
			t.Errorf("%s: no acknowledged write found lost (%d other problems)", mutation, len(problems))
		}
		t.Logf("mutation check (%s): %d acknowledged writes lost or replaced, %d problems in all; the first:\n%s",
			mutation, lost, len(problems), strings.Join(problems[:min(len(problems), 10)], "\n"))
		return true
	}
	const shown = 25
	for _, p := range problems[:min(len(problems), shown)] {
		t.Error(p)
	}
	if len(problems) > shown {
		t.Errorf("... and %d more problems", len(problems)-shown)
	}
	return false
}

// cnpgCluster is one of the chart's CloudNativePG Clusters, seen through
// kubectl.
type cnpgCluster struct {
	e         kindEnv
	ns        string
	name      string // the Cluster's
	instances int    // how many make it healthy
}

// status is the Cluster's current primary, ready instances and phase.
func (c cnpgCluster) status(t *testing.T) (primary string, ready int, phase string) {
	t.Helper()
	out, err := c.e.output("-n", c.ns, "get", "clusters.postgresql.cnpg.io", c.name, "-o",
		"jsonpath={.status.currentPrimary}|{.status.readyInstances}|{.status.phase}")
	if err != nil {
		return "", 0, err.Error()
	}
	fields := strings.SplitN(out, "|", 3)
	if len(fields) != 3 {
		return "", 0, out
	}
	ready, _ = strconv.Atoi(fields[1])
	return fields[0], ready, fields[2]
}

func (c cnpgCluster) primary(t *testing.T) string {
	t.Helper()
	p, _, _ := c.status(t)
	if p == "" {
		t.Fatal("the Cluster has no current primary")
	}
	return p
}

// standby is a ready standby of the Cluster.
func (c cnpgCluster) standby(t *testing.T) string {
	t.Helper()
	primary := c.primary(t)
	out := c.e.run(t, nil, c.e.kubectl, "-n", c.ns, "get", "pods", "-l", "cnpg.io/cluster="+c.name+",cnpg.io/podRole=instance", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].ready}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, ready, _ := strings.Cut(line, " "); name != primary && ready == "true" {
			return name
		}
	}
	t.Fatalf("no ready standby besides the primary %s:\n%s", primary, out)
	return ""
}

// promoted is when the current primary was promoted.
func (c cnpgCluster) promoted(t *testing.T) time.Time {
	t.Helper()
	out := c.e.run(t, nil, c.e.kubectl, "-n", c.ns, "get", "clusters.postgresql.cnpg.io", c.name, "-o", "jsonpath={.status.currentPrimaryTimestamp}")
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("the Cluster's currentPrimaryTimestamp %q: %v", out, err)
	}
	return at
}

// waitHealthy waits until every instance is ready, the Cluster says it is
// healthy and its primary satisfies ok, and returns when it was seen so.
func (c cnpgCluster) waitHealthy(t *testing.T, what string, ok func(primary string) bool) time.Time {
	t.Helper()
	polltest.Until(t, 5*time.Minute, what+": the Cluster healthy again", func() error {
		primary, ready, phase := c.status(t)
		if ready != c.instances || phase != "Cluster in healthy state" || !ok(primary) {
			return fmt.Errorf("primary %q, %d of %d instances ready, phase %q", primary, ready, c.instances, phase)
		}
		return nil
	})
	return time.Now()
}

// holdStreaming keeps the primary's standbys from streaming for d, by
// terminating their WAL senders every 200ms (a standby retries after
// wal_retrieve_retry_interval, 5s). With asynchronous replication the
// primary acknowledges commits that only it has meanwhile.
func (c cnpgCluster) holdStreaming(t *testing.T, primary string, d time.Duration) {
	t.Helper()
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i + 1))
psql -U postgres -AtqXc 'SELECT pg_terminate_backend(pid) FROM pg_stat_replication' >/dev/null 2>&1; sleep 0.2; done`, int(d/(200*time.Millisecond)))
	go c.e.output("-n", c.ns, "exec", primary, "-c", "postgres", "--", "sh", "-c", script)
	time.Sleep(d)
}

// psql runs sql on the primary's evalmeter database and returns its rows,
// unaligned: fields separated by |.
func (c cnpgCluster) psql(t *testing.T, sql string) string {
	t.Helper()
	return c.e.run(t, nil, c.e.kubectl, "-n", c.ns, "exec", c.primary(t), "-c", "postgres", "--",
		"psql", "-U", "postgres", "-d", "evalmeter", "-AtqX", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", sql)
}

// ledger reads what PostgreSQL holds for clientID, on the primary.
func (c cnpgCluster) ledger(t *testing.T, clientID string) ledgerState {
	t.Helper()
	return readLedger(t, func(sql string) string { t.Helper(); return c.psql(t, sql) }, clientID)
}

// output runs kubectl with args on the cluster and returns its output, or
// the error with kubectl's stderr.
func (e kindEnv) output(args ...string) (string, error) {
	cmd := exec.Command(e.kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}
