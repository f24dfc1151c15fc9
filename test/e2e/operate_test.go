//go:build e2e

package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

// checkOperations checks, on the installed chart, what a platform team
// relies on: the controller's metrics refuse an unauthenticated scrape and
// serve a ServiceAccount bound to the metrics-reader ClusterRole; an
// agreement crossing its low-credit threshold reports LowCredit; a key
// rotated with a grace period keeps working until its deadline, then not.
func checkOperations(t *testing.T, e kindEnv, ns string, svc endpoint, kubectl func(...string) string, apply func(yaml string)) {
	// The controller's metrics, through a port-forward to their Service.
	metricsURL := "https://" + portForward(t, e, ns, "svc/evalmeter-controller-metrics", "8443") + "/metrics"
	kubectl("-n", ns, "create", "serviceaccount", "e2e-scraper")
	kubectl("-n", ns, "create", "serviceaccount", "e2e-stranger")
	kubectl("create", "clusterrolebinding", "e2e-scraper", "--clusterrole=evalmeter-metrics-reader", "--serviceaccount="+ns+":e2e-scraper")
	scraper := strings.TrimSpace(kubectl("-n", ns, "create", "token", "e2e-scraper"))
	stranger := strings.TrimSpace(kubectl("-n", ns, "create", "token", "e2e-stranger"))
	scrape := func(token string) (int, string, error) {
		// The certificate is the controller's self-signed one (no certSecret).
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, _ := http.NewRequest(http.MethodGet, metricsURL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"no token", "", http.StatusUnauthorized}, {"an unbound ServiceAccount", stranger, http.StatusForbidden}, {"metrics-reader", scraper, http.StatusOK}} {
		// RBAC takes a moment to reach the authorizer's cache after the binding.
		polltest.Until(t, 30*time.Second, "the controller's metrics for "+tc.who, func() error {
			code, body, err := scrape(tc.token)
			if err != nil || code != tc.want {
				return fmt.Errorf("status %d, want %d: %v %.200s", code, tc.want, err, body)
			}
			return nil
		})
	}

	// An agreement of 3 hours that warns at 1, with a 30s rotation grace period.
	apply(`apiVersion: evalmeter.io/v1alpha1
kind: ClientAgreement
metadata:
  name: ops-e2e
spec:
  clientID: ops-e2e
  allocatedHours: 3
  lowCreditThreshold: 1
  apiKey:
    rotationGracePeriod: 30s
`)
	condition := func(kind string) string {
		return kubectl("-n", ns, "get", "clientagreement", "ops-e2e", "-o", `jsonpath={.status.conditions[?(@.type=="`+kind+`")].status}`)
	}
	polltest.Until(t, 60*time.Second, "ops-e2e Ready", func() error {
		if got := condition("Ready"); got != "True" {
			return fmt.Errorf("Ready %q", got)
		}
		return nil
	})
	if got := condition("LowCredit"); got != "False" {
		t.Fatalf("LowCredit with 3 of 3 hours remaining: %q, want False", got)
	}
	oldKey := secretKey(t, kubectl, ns, "ops-e2e-api-key")
	for i := range 2 {
		if code, body := svc.call(t, "POST", "/sessions", oldKey, fmt.Sprintf("ops-e2e-session-%d", i), nil); code != http.StatusCreated {
			t.Fatalf("session %d: %d %s", i, code, body)
		}
	}
	polltest.Until(t, 60*time.Second, "LowCredit at 1 hour remaining", func() error {
		if got := condition("LowCredit"); got != "True" {
			return fmt.Errorf("LowCredit %q", got)
		}
		return nil
	})
	waitEvent(t, kubectl, ns, "ops-e2e", "Warning", "LowCredit")
	_, body, err := scrape(scraper)
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range [][]string{
		{"evalmeter_agreement_hours", `client_id="ops-e2e"`, `kind="remaining"`},
		{"evalmeter_agreement_low_credit_threshold_hours", `client_id="ops-e2e"`},
	} {
		if !hasSeries(body, "1", series[0], series[1:]...) {
			t.Errorf("the controller's metrics lack %v = 1", series)
		}
	}

	// Rotation with a grace period: both keys work until the deadline in the
	// status, then only the new one.
	newKey, err := credential.NewAPIKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"data":{"api-key":%q}}`, base64.StdEncoding.EncodeToString([]byte(newKey)))
	kubectl("-n", ns, "patch", "secret", "ops-e2e-api-key", "--type", "merge", "-p", patch)
	var revokeAt time.Time
	polltest.Until(t, 60*time.Second, "status.previousAPIKeys", func() error {
		out := kubectl("-n", ns, "get", "clientagreement", "ops-e2e", "-o", "jsonpath={.status.previousAPIKeys[0].revokeAt}")
		revokeAt, err = time.Parse(time.RFC3339, out)
		return err
	})
	waitEvent(t, kubectl, ns, "ops-e2e", "Normal", "Rotated")
	usage := func(key string) int { code, _ := svc.call(t, "GET", "/usage", key, "", nil); return code }
	if time.Until(revokeAt) < 5*time.Second {
		t.Fatalf("the grace period ends at %s, too soon to check the old key", revokeAt)
	}
	if old, cur := usage(oldKey), usage(newKey); old != http.StatusOK || cur != http.StatusOK {
		t.Errorf("in the grace period: old key %d, new key %d; want both 200", old, cur)
	}
	time.Sleep(time.Until(revokeAt))
	if old, cur := usage(oldKey), usage(newKey); old != http.StatusUnauthorized || cur != http.StatusOK {
		t.Errorf("after the grace period: old key %d (want 401), new key %d (want 200)", old, cur)
	}
	waitEvent(t, kubectl, ns, "ops-e2e", "Normal", "Revoked")
	kubectl("-n", ns, "delete", "clientagreement", "ops-e2e", "--wait", "--timeout=60s")
}

// portForward forwards a free local port to target's port until the test
// ends and returns 127.0.0.1:PORT.
func portForward(t *testing.T, e kindEnv, ns, target, port string) string {
	t.Helper()
	addr := proctest.FreeAddr(t)
	_, local, _ := net.SplitHostPort(addr)
	cmd := exec.Command(e.kubectl, "-n", ns, "port-forward", "--address", "127.0.0.1", target, local+":"+port)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	polltest.Until(t, 30*time.Second, "kubectl port-forward "+target, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	return addr
}

// secretKey is the API key in the Secret ns/name.
func secretKey(t *testing.T, kubectl func(...string) string, ns, name string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(kubectl("-n", ns, "get", "secret", name, "-o", "jsonpath={.data.api-key}"))
	if err != nil || !strings.HasPrefix(string(raw), "evk_") {
		t.Fatalf("Secret %s: api-key %q: %v", name, raw, err)
	}
	return string(raw)
}

// waitEvent waits for an event of type and reason about the agreement.
func waitEvent(t *testing.T, kubectl func(...string) string, ns, agreement, typ, reason string) {
	t.Helper()
	polltest.Until(t, 60*time.Second, typ+" event "+reason, func() error {
		out := kubectl("-n", ns, "get", "events", "--field-selector",
			"involvedObject.name="+agreement+",type="+typ+",reason="+reason, "-o", "name")
		if strings.TrimSpace(out) == "" {
			return fmt.Errorf("no %s event %s about %s", typ, reason, agreement)
		}
		return nil
	})
}

// hasSeries reports whether the exposition has a series of metric with the
// labels (name="value") and value.
func hasSeries(exposition, value, metric string, labels ...string) bool {
	s := bufio.NewScanner(strings.NewReader(exposition))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		found := strings.HasPrefix(line, metric+"{") && strings.HasSuffix(line, "} "+value)
		for _, l := range labels {
			found = found && strings.Contains(line, l)
		}
		if found {
			return true
		}
	}
	return false
}
