//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/client"
	"github.com/evalmeter/evalmeter/internal/certtest"
	"github.com/evalmeter/evalmeter/internal/metrics"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/receipt"
)

// kindEnv is what hack/e2e.sh hands over: a kind cluster with evalmeter's
// image loaded, the tools, and where the API's node port is published.
type kindEnv struct {
	kubeconfig, kubectl, helm string
	apiURL                    string // https://127.0.0.1:PORT, the node port on the host
	nodePort                  string
	ingressAddr               string // 127.0.0.1:PORT, Traefik's HTTPS node port on the host
	image                     string // evalmeter's image, loaded into the node
	postgresImage             string // empty: the chart's default, pulled by the node
	traefikManifest           string // empty: testdata/traefik.yaml (its image pulled by the node)
}

func newKindEnv(t *testing.T) kindEnv {
	t.Helper()
	e := kindEnv{
		kubeconfig:    os.Getenv("KUBECONFIG"),
		kubectl:       os.Getenv("KUBECTL"),
		helm:          os.Getenv("HELM"),
		apiURL:        os.Getenv("E2E_API_URL"),
		nodePort:      os.Getenv("E2E_NODE_PORT"),
		ingressAddr:   os.Getenv("E2E_INGRESS_ADDR"),
		image:         os.Getenv("E2E_IMAGE"),
		postgresImage: os.Getenv("E2E_POSTGRES_IMAGE"),

		traefikManifest: os.Getenv("E2E_TRAEFIK_MANIFEST"),
	}
	if e.kubeconfig == "" || e.kubectl == "" || e.helm == "" || e.apiURL == "" || e.nodePort == "" || e.ingressAddr == "" || e.image == "" {
		t.Fatal("KUBECONFIG, KUBECTL, HELM, E2E_API_URL, E2E_NODE_PORT, E2E_INGRESS_ADDR and E2E_IMAGE must be set: run `make test-e2e` (hack/e2e.sh)")
	}
	return e
}

// run runs the command name (kubectl, helm) on the cluster with stdin and
// returns its output; it ends the test when the command fails.
func (e kindEnv) run(t *testing.T, stdin []byte, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestKind installs the chart with Helm on the kind cluster hack/e2e.sh made,
// as an operator would, with the bundled PostgreSQL and TLS in the pods, then
// uses the service as a customer through the API Service's node port: every
// request crosses the cluster network (kube-proxy, the Service, one of two API
// replicas). Halfway, helm upgrade moves TLS to an Ingress (Traefik); the rest
// of the flow goes through it, with the sessions and credits of before.
func TestKind(t *testing.T) {
	e := newKindEnv(t)
	const ns = "evalmeter"
	run := func(stdin []byte, name string, args ...string) string {
		t.Helper()
		return e.run(t, stdin, name, args...)
	}
	kubectl := func(args ...string) string { t.Helper(); return run(nil, e.kubectl, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, e, ns)
		}
	})

	// The operator's part: a namespace, the API's TLS certificate, helm install.
	kubectl("create", "namespace", ns)
	certFile, keyFile, roots := selfSignedCert(t, "127.0.0.1", "localhost", "evalmeter-api", "evalmeter-api."+ns+".svc")
	kubectl("-n", ns, "create", "secret", "tls", "evalmeter-tls", "--cert", certFile, "--key", keyFile)
	// values are the --set flags of both helm install and helm upgrade.
	values := func(extra ...string) []string {
		repository, tag := splitImage(e.image)
		v := []string{"--namespace", ns, "--wait", "--timeout", "6m",
			"--set-string", "image.repository=" + repository, "--set-string", "image.tag=" + tag,
			"--set", "image.pullPolicy=IfNotPresent",
			"--set", "postgresql.enabled=true",
			"--set-string", "controller.resync=2s",
		}
		if e.postgresImage != "" {
			repository, tag := splitImage(e.postgresImage)
			v = append(v, "--set-string", "postgresql.image.repository="+repository, "--set-string", "postgresql.image.tag="+tag)
		}
		return append(v, extra...)
	}
	install := append([]string{"install", "evalmeter", filepath.Join(repo, "charts", "evalmeter")}, values(
		"--set", "api.service.type=NodePort", "--set", "api.service.nodePort="+e.nodePort,
		"--set", "api.service.port=443", "--set-string", "api.tlsSecret=evalmeter-tls")...)
	start := time.Now()
	run(nil, e.helm, install...)
	t.Logf("helm install --wait: %s", time.Since(start).Round(time.Second))
	if got := kubectl("-n", ns, "get", "deployment", "evalmeter-api", "-o", "jsonpath={.status.readyReplicas}"); got != "2" {
		t.Fatalf("API ready replicas = %q, want 2", got)
	}

	svc := endpoint{
		url: e.apiURL + "/api/svc/v1",
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
		},
	}
	svc.waitUntilServing(t)
	checkOperations(t, e, ns, svc, kubectl, func(yaml string) { run([]byte(yaml), e.kubectl, "-n", ns, "apply", "-f", "-") })

	// The agreement: two credits, valid for a day.
	validUntil := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	run([]byte(fmt.Sprintf(`apiVersion: evalmeter.io/v1alpha1
kind: ClientAgreement
metadata:
  name: kind-e2e
spec:
  clientID: kind-e2e
  allocatedHours: 2
  validUntil: %q
  orderReference: PO-E2E-1
`, validUntil)), e.kubectl, "-n", ns, "apply", "-f", "-")
	status := func(want string) {
		t.Helper()
		polltest.Until(t, 60*time.Second, "the agreement's status "+want, func() error {
			got := kubectl("-n", ns, "get", "clientagreement", "kind-e2e", "-o",
				"jsonpath={.status.phase} {.status.consumedHours} {.status.remainingHours}")
			if got != want {
				return fmt.Errorf("phase, consumed, remaining = %q", got)
			}
			return nil
		})
	}
	status("Active 0 2")

	// The customer's part. The operator hands over the key from the Secret.
	encoded := kubectl("-n", ns, "get", "secret", "kind-e2e-api-key", "-o", "jsonpath={.data.api-key}")
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || !strings.HasPrefix(string(raw), "evk_") {
		t.Fatalf("Secret kind-e2e-api-key: api-key %q: %v", raw, err)
	}
	key := string(raw)
	call := func(method, path, bearer, idemKey string, body []byte) (int, []byte) {
		t.Helper()
		return svc.call(t, method, path, bearer, idemKey, body)
	}
	// A session, and its replay: the same session, no second credit.
	code, body := call("POST", "/sessions", key, "kind-e2e-session-1", nil)
	var opened api.SessionEnvelope
	if code != http.StatusCreated || json.Unmarshal(body, &opened) != nil || opened.IdempotentReplay || opened.Session.Token == "" {
		t.Fatalf("open a session: %d %s", code, body)
	}
	code, body = call("POST", "/sessions", key, "kind-e2e-session-1", nil)
	var replayed api.SessionEnvelope
	if code != http.StatusCreated || json.Unmarshal(body, &replayed) != nil || !replayed.IdempotentReplay ||
		replayed.Session.ID != opened.Session.ID || replayed.Session.Token != opened.Session.Token {
		t.Fatalf("replay the opening: %d %s, want session %s again", code, body, opened.Session.ID)
	}

	// Metrics: the service's answer is the engine's, byte for byte; the
	// replay is the stored answer.
	example, err := os.ReadFile(filepath.Join(repo, "api", "examples", "metrics-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.Compute(example)
	if err != nil {
		t.Fatal(err)
	}
	computed, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, replay := range []bool{false, true} {
		code, body = call("POST", "/metrics", opened.Session.Token, "kind-e2e-metrics-1", example)
		want := fmt.Sprintf(`{"metrics":%s,"idempotent_replay":%t}`, computed, replay)
		if code != http.StatusOK || string(body) != want {
			t.Fatalf("metrics (replay %t): %d\n got %s\nwant %s", replay, code, body, want)
		}
	}
	// The same key with another request: 409.
	var doc map[string]any
	if err := json.Unmarshal(example, &doc); err != nil {
		t.Fatal(err)
	}
	doc["run_id"] = "another-run"
	other, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if code, body = call("POST", "/metrics", opened.Session.Token, "kind-e2e-metrics-1", other); code != http.StatusConflict {
		t.Fatalf("another request with the same Idempotency-Key: %d %s, want 409", code, body)
	}

	code, body = call("GET", "/usage", key, "", nil)
	var usage api.UsageEnvelope
	if code != http.StatusOK || json.Unmarshal(body, &usage) != nil {
		t.Fatalf("usage: %d %s", code, body)
	}
	if u := usage.Usage; u.ClientID != "kind-e2e" || u.AllocatedHours != 2 || u.ConsumedHours != 1 || u.RemainingHours != 1 || u.ActiveSessions != 1 {
		t.Fatalf("usage = %+v, want kind-e2e 2 allocated, 1 consumed, 1 remaining, 1 active", u)
	}
	status("Active 1 1")

	// The second credit, then 402.
	if code, body = call("POST", "/sessions", key, "kind-e2e-session-2", nil); code != http.StatusCreated {
		t.Fatalf("second session: %d %s", code, body)
	}
	if code, body = call("POST", "/sessions", key, "kind-e2e-session-3", nil); code != http.StatusPaymentRequired || !bytes.Contains(body, []byte(`"credits_exhausted"`)) {
		t.Fatalf("third session with two credits: %d %s, want 402 credits_exhausted", code, body)
	}
	status("Exhausted 2 0")
	table := kubectl("-n", ns, "get", "cla")
	for _, column := range []string{"CLIENT", "ALLOCATED", "CONSUMED", "REMAINING", "VALID-UNTIL", "PHASE", "kind-e2e", "Exhausted"} {
		if !strings.Contains(table, column) {
			t.Errorf("kubectl get cla lacks %s:\n%s", column, table)
		}
	}

	// helm upgrade to the production shape: TLS at an Ingress (Traefik), the
	// API Service back to ClusterIP. The generated database and token secrets
	// are kept, so the ledger and open sessions carry over.
	traefik := e.traefikManifest
	if traefik == "" {
		traefik = filepath.Join(repo, "test", "e2e", "testdata", "traefik.yaml")
	}
	kubectl("apply", "-f", traefik)
	kubectl("-n", "traefik", "rollout", "status", "deployment/traefik", "--timeout=2m")
	const host = "evalmeter.e2e.test"
	certFile, keyFile, ingressRoots := selfSignedCert(t, host)
	kubectl("-n", ns, "create", "secret", "tls", "evalmeter-ingress-tls", "--cert", certFile, "--key", keyFile)
	apiPods := strings.Fields(kubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=api", "-o", "name"))
	start = time.Now()
	run(nil, e.helm, append([]string{"upgrade", "evalmeter", filepath.Join(repo, "charts", "evalmeter")}, values(
		"--set", "ingress.enabled=true", "--set-string", "ingress.className=traefik",
		"--set-string", "ingress.host="+host, "--set-string", "ingress.tlsSecret=evalmeter-ingress-tls")...)...)
	// helm --wait returns once the new pods are ready; the old ones, which serve
	// only HTTPS, drain for a while and may still get requests from Traefik.
	kubectl(append([]string{"-n", ns, "wait", "--for=delete", "--timeout=3m"}, apiPods...)...)
	t.Logf("helm upgrade --wait, then the old API pods gone: %s", time.Since(start).Round(time.Second))
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	ing := endpoint{
		url: "https://" + host + "/api/svc/v1",
		client: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				// The host name resolves to Traefik's node port on this machine.
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return dialer.DialContext(ctx, network, e.ingressAddr)
				},
				TLSClientConfig: &tls.Config{RootCAs: ingressRoots, MinVersion: tls.VersionTLS12},
			},
		},
	}
	ing.waitUntilServing(t)
	call = func(method, path, bearer, idemKey string, body []byte) (int, []byte) {
		t.Helper()
		return ing.call(t, method, path, bearer, idemKey, body)
	}
	code, body = call("GET", "/usage", key, "", nil)
	usage = api.UsageEnvelope{}
	if code != http.StatusOK || json.Unmarshal(body, &usage) != nil {
		t.Fatalf("usage through the Ingress: %d %s", code, body)
	}
	if u := usage.Usage; u.ConsumedHours != 2 || u.RemainingHours != 0 || u.ActiveSessions != 2 {
		t.Fatalf("usage after helm upgrade = %+v, want 2 consumed, 0 remaining, 2 active", u)
	}
	// The session opened before the upgrade still works: its replay, and a new request.
	code, body = call("POST", "/metrics", opened.Session.Token, "kind-e2e-metrics-1", example)
	if want := fmt.Sprintf(`{"metrics":%s,"idempotent_replay":true}`, computed); code != http.StatusOK || string(body) != want {
		t.Fatalf("metrics replay after helm upgrade: %d\n got %s\nwant %s", code, body, want)
	}
	if code, body = call("POST", "/metrics", opened.Session.Token, "kind-e2e-metrics-2", other); code != http.StatusOK || !bytes.Contains(body, []byte(`"idempotent_replay":false`)) {
		t.Fatalf("metrics through the Ingress: %d %s", code, body)
	}
	checkReceipt(t, ing, "https://"+host, opened.Session.Token, other)

	// validUntil passes: 403 on key-authenticated calls, before the credit check.
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	kubectl("-n", ns, "patch", "clientagreement", "kind-e2e", "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"validUntil":%q}}`, past))
	polltest.Until(t, 60*time.Second, "403 after validUntil", func() error {
		code, body := call("POST", "/sessions", key, "kind-e2e-session-4", nil)
		if code != http.StatusForbidden || !bytes.Contains(body, []byte(`"agreement_expired"`)) {
			return fmt.Errorf("open a session: %d %s", code, body)
		}
		return nil
	})
	if code, body = call("GET", "/usage", key, "", nil); code != http.StatusForbidden {
		t.Fatalf("usage after validUntil: %d %s, want 403", code, body)
	}
	status("Expired 2 0")

	// Deleting the agreement revokes the key.
	kubectl("-n", ns, "delete", "clientagreement", "kind-e2e", "--wait", "--timeout=60s")
	if code, body = call("GET", "/usage", key, "", nil); code != http.StatusUnauthorized {
		t.Fatalf("usage after the agreement was deleted: %d %s, want 401", code, body)
	}

	// helm uninstall keeps the CRD (and so every agreement) and the token Secret.
	run(nil, e.helm, "uninstall", "evalmeter", "--namespace", ns, "--wait", "--timeout", "3m")
	kubectl("get", "crd", "clientagreements.evalmeter.io")
	kubectl("-n", ns, "get", "secret", "evalmeter-token")
	if out := kubectl("-n", ns, "get", "deployments", "-o", "name"); out != "" {
		t.Errorf("deployments left after helm uninstall: %s", out)
	}
}

// endpoint is the API at url, reached with client.
type endpoint struct {
	client *http.Client
	url    string // ending in /api/svc/v1
}

func (a endpoint) call(t *testing.T, method, path, bearer, idemKey string, body []byte) (int, []byte) {
	t.Helper()
	status, b, err := request(a.client, method, a.url+path, bearer, idemKey, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// waitUntilServing waits until the API answers through a's route (Service
// routing and Ingress configuration take a moment to follow a change).
func (a endpoint) waitUntilServing(t *testing.T) {
	t.Helper()
	polltest.Until(t, 90*time.Second, "the API at "+a.url, func() error {
		status, body, err := request(a.client, "GET", a.url+"/schema", "", "", nil)
		if err != nil {
			return err
		}
		if status != http.StatusUnauthorized {
			return fmt.Errorf("GET /schema without a key: %d %s", status, body)
		}
		return nil
	})
}

// splitImage splits REPOSITORY:TAG (the tag after the last slash).
func splitImage(ref string) (repository, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// selfSignedCert writes a self-signed server certificate for hosts (IP
// addresses or DNS names) and its key, and returns their paths and a pool
// that trusts the certificate.
func selfSignedCert(t *testing.T, hosts ...string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM := certtest.SelfSigned(t, "evalmeter e2e", hosts...)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, roots
}

// dumpCluster logs what an operator would look at when something failed,
// and the output of the kubectl commands extra.
func dumpCluster(t *testing.T, e kindEnv, ns string, extra ...[]string) {
	for _, args := range append([][]string{
		{"get", "nodes,pods,services,pvc", "-A", "-o", "wide"},
		{"-n", ns, "describe", "pods"},
		{"-n", ns, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", ns, "logs", "-l", "app.kubernetes.io/name=evalmeter", "--all-containers", "--prefix", "--tail=80"},
		{"-n", ns, "get", "clientagreements", "-o", "yaml"},
	}, extra...) {
		cmd := exec.Command(e.kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
		out, err := cmd.CombinedOutput()
		t.Logf("kubectl %s (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// checkReceipt posts a metrics request through the Ingress with the Go
// client (a replay) and verifies its receipt against the key set the Ingress
// serves with no credential: signed by the chart's generated key, under the
// public URL the chart takes from the Ingress.
func checkReceipt(t *testing.T, ing endpoint, base, token string, metricsRequest []byte) {
	t.Helper()
	c, err := client.New(base, "")
	if err != nil {
		t.Fatal(err)
	}
	c.HTTPClient = ing.client
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.PostMetrics(ctx, token, "kind-e2e-metrics-2", metricsRequest)
	if err != nil {
		t.Fatalf("metrics through the Ingress with the Go client: %v", err)
	}
	code, keysJSON, err := request(ing.client, "GET", base+"/.well-known/evalmeter/receipt-keys.json", "", "", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("the receipt key set through the Ingress: %d %s %v", code, keysJSON, err)
	}
	keys, err := receipt.ParseKeySet(keysJSON)
	if err != nil {
		t.Fatal(err)
	}
	m, body := res.Receipt.Message()
	v, err := receipt.Verify(m, body, keys)
	if err != nil {
		t.Fatalf("the receipt of a metrics response through the Ingress: %v\n%+v", err, res.Receipt)
	}
	if age := time.Since(v.Created); age < -time.Minute || age > 5*time.Minute || !res.Replay || m.Header.Get(api.HeaderClient) != "kind-e2e" {
		t.Errorf("receipt: created %s, replay %t, client %q", v.Created, res.Replay, m.Header.Get(api.HeaderClient))
	}
	t.Logf("receipt through the Ingress: key %s, created %s, target %s", v.KeyID, v.Created.Format(time.RFC3339), res.Receipt.Request.TargetURI)
}
