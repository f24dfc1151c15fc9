//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The upgrade test's load and schedule.
const (
	upCredits  = 150
	upAttempts = 300 // distinct Idempotency-Keys that try to open a session
	upSpare    = 20
	// The first upCredits+upSpare opens are spread over this long: sessions
	// are charged before, during and after each rollout.
	upOpenPeriod = 110 * time.Second
	// The load runs at least this long, and upSettle past the last rollout.
	upLoad   = 120 * time.Second
	upSettle = 15 * time.Second
	// The upgrade starts this far into the load; the downgrade upSettle
	// after the upgrade is over, and not before downgradeAt.
	upUpgradeAt, upDowngradeAt = 20 * time.Second, 65 * time.Second
	upReplicas                 = 2 // loadValues' api.replicas
)

// TestUpgrade is the upgrade an operator makes, under a customer's load, on
// the kind cluster hack/e2e.sh made (make test-e2e-upgrade): helm install of
// the previous release (its chart and its image, built from its commit in
// hack/releases), then helm upgrade to this tree's chart and image while the
// load runs, then the image alone back to the previous release's (a
// downgrade: the old code on the new schema). The API's two pods roll one by
// one each time, their init containers running the migrations.
//
// It checks the ledger against the client's record (checkLedger): no
// acknowledged session or metrics record lost, no credit spent twice, every
// failure an enveloped 503 that was retried to an answer; and that every
// Idempotency-Key acknowledged before a rollout is still replayed after it,
// with the same session, token and result.
func TestUpgrade(t *testing.T) {
	e := newKindEnv(t)
	prevChart, prevImage, prevVersion := os.Getenv("E2E_PREVIOUS_CHART"), os.Getenv("E2E_PREVIOUS_IMAGE"), os.Getenv("E2E_PREVIOUS_VERSION")
	if prevChart == "" || prevImage == "" || prevVersion == "" {
		t.Fatal("E2E_PREVIOUS_CHART, E2E_PREVIOUS_IMAGE and E2E_PREVIOUS_VERSION must be set: run `make test-e2e-upgrade` (hack/e2e.sh)")
	}
	const ns = "evalmeter"
	kubectl := func(args ...string) string { t.Helper(); return e.run(t, nil, e.kubectl, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, e, ns)
		}
	})

	kubectl("create", "namespace", ns)
	certFile, keyFile, roots := selfSignedCert(t, "127.0.0.1", "localhost")
	kubectl("-n", ns, "create", "secret", "tls", "evalmeter-tls", "--cert", certFile, "--key", keyFile)
	// helm's arguments for chart with image: the same values each time, the
	// chart and the image aside.
	helm := func(verb, chart, image string) []string {
		args := loadValues(e, ns, image, false, "--set", "postgresql.enabled=true")
		if e.postgresImage != "" {
			repository, tag := splitImage(e.postgresImage)
			args = append(args, "--set-string", "postgresql.image.repository="+repository, "--set-string", "postgresql.image.tag="+tag)
		}
		return append([]string{verb, "evalmeter", chart}, args...)
	}
	// serves checks that the API runs image, and logs what it says it is.
	serves := func(image string) {
		t.Helper()
		if got := kubectl("-n", ns, "get", "deployment", "evalmeter-api", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != image {
			t.Fatalf("the API's Deployment runs %q, want %q", got, image)
		}
		t.Logf("the API runs %s: %s", image, strings.TrimSpace(kubectl("-n", ns, "exec", "deployment/evalmeter-api", "-c", "api", "--", "/evalmeter", "version")))
	}
	start := time.Now()
	e.run(t, nil, e.helm, helm("install", prevChart, prevImage)...)
	t.Logf("helm install of %s (%s): %s", prevVersion, prevImage, time.Since(start).Round(time.Second))
	serves(prevImage)

	apiKey := loadAgreement(t, e, ns, "up-e2e", "PO-UP-1", upCredits)
	example := exampleRequest(t)
	c, _ := newLoadClient(t, e, roots)

	l := startLoad(c, apiKey, loadShape{
		prefix: "up-e2e", attempts: upAttempts, paced: upCredits + upSpare, period: upOpenPeriod,
		resolveWithin: upLoad + 4*time.Minute, metrics: example,
	})
	after := func(offset time.Duration) { time.Sleep(time.Until(l.t0.Add(offset))) }
	var faults []fault
	var problems []string
	// rollout runs helm with args and returns the rollout as a fault, with
	// the fewest API pods that were available meanwhile.
	rollout := func(name string, args []string) (fault, int) {
		f := fault{name: name, start: time.Now()}
		done := make(chan struct{})
		fewest := make(chan int)
		go func() { // the Deployment's available pods, every half second
			least := upReplicas
			for {
				select {
				case <-done:
					fewest <- least
					return
				case <-time.After(500 * time.Millisecond):
				}
				out, err := e.output("-n", ns, "get", "deployment", "evalmeter-api", "-o", "jsonpath={.status.availableReplicas}")
				if n, convErr := strconv.Atoi(strings.TrimSpace(out)); err == nil && convErr == nil {
					least = min(least, n)
				} else if err == nil && strings.TrimSpace(out) == "" {
					least = 0 // the field is left out when none is available
				}
			}
		}()
		e.run(t, nil, e.helm, args...)
		kubectl("-n", ns, "rollout", "status", "deployment/evalmeter-api", "--timeout=5m")
		close(done)
		f.end = time.Now()
		return f, <-fewest
	}
	// replayAll replays every open and metrics post acknowledged before
	// cutoff: each must be a replay of what was acknowledged. A 503 is
	// retried, as a client would.
	replayAll := func(phase string, cutoff time.Time) {
		deadline := time.Now().Add(time.Minute)
		sessions, metrics := 0, 0
		for _, s := range c.sessions() {
			if !s.end.Before(cutoff) {
				continue
			}
			sessions++
			var o op
			untilAnswered(deadline, func(attempt int) op { o = c.openSession(apiKey, s.key, attempt, opReplay); return o })
			if o.status != 201 || !o.replay || o.sessionID != s.sessionID || o.token != s.token {
				problems = append(problems, fmt.Sprintf("%s: session key %s: %d (%s), replay %t, session %s; acknowledged %s before",
					phase, s.key, o.status, o.code, o.replay, o.sessionID, s.sessionID))
			}
		}
		for key, token := range c.acknowledgedMetrics(cutoff) {
			metrics++
			var o op
			untilAnswered(deadline, func(attempt int) op { o = c.postMetrics(token, key, attempt, example); return o })
			if o.status != 200 || !o.replay {
				problems = append(problems, fmt.Sprintf("%s: metrics key %s: %d (%s), replay %t; want a 200 replay", phase, key, o.status, o.code, o.replay))
			}
		}
		t.Logf("%s: %d sessions and %d metrics requests acknowledged before it replayed", phase, sessions, metrics)
	}

	// upgrade rolls the API to the tree's chart with image, then replays.
	upgrade := func(name, image string) {
		f, fewest := rollout(name, helm("upgrade", filepath.Join(repo, "charts", "evalmeter"), image))
		faults = append(faults, f)
		serves(image)
		t.Logf("%s: %s, at least %d of %d API pods available", f.name, f.end.Sub(f.start).Round(time.Second), fewest, upReplicas)
		if fewest < upReplicas {
			problems = append(problems, fmt.Sprintf("%s: %d of %d API pods available at one time: the pods did not roll one by one", f.name, fewest, upReplicas))
		}
		replayAll("after "+name, f.start)
	}
	after(upUpgradeAt)
	upgrade("helm upgrade to this tree (chart and "+e.image+")", e.image)
	after(max(upDowngradeAt, time.Since(l.t0)+upSettle))
	upgrade("image back to "+prevVersion+" ("+prevImage+")", prevImage)

	after(max(upLoad, time.Since(l.t0)+upSettle))
	end := l.stop()

	h := c.h.all()
	state := readLedger(t, func(sql string) string {
		t.Helper()
		return e.run(t, nil, e.kubectl, "-n", ns, "exec", "evalmeter-postgresql-0", "-c", "postgresql", "--",
			"psql", "-U", "evalmeter", "-d", "evalmeter", "-AtqX", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", sql)
	}, "up-e2e")
	t.Logf("load of %s: the ledger: %d of %d credits consumed, %d sessions, %d metrics requests\n%s",
		end.Sub(l.t0).Round(time.Second), state.consumed, state.allocated, len(state.sessions), len(state.metricsKeys), summary(h, faults, end))
	problems = append(problems, checkLedger(h, state, upAttempts, faults)...)
	problems = append(problems, unanswered(h)...)
	judge(t, problems, "", nil)
}

// acknowledgedMetrics is every metrics post answered 200 before cutoff: its
// Idempotency-Key and the session token it was posted with.
func (c *loadClient) acknowledgedMetrics(cutoff time.Time) map[string]string {
	h := c.h.all()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for _, o := range h {
		if o.kind == opMetrics && o.status == 200 && o.end.Before(cutoff) {
			out[o.key] = c.metrics[o.key]
		}
	}
	return out
}
