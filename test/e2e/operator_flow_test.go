package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/envtesttest"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const repo = "../.."

// TestOperatorFlow: an operator installs the CRD and applies the sample
// agreement with kubectl; the controller and the API run as processes; the
// client takes its key from the Secret, opens a session, posts metrics and
// reads its usage; the agreement's status shows the credit consumed.
func TestOperatorFlow(t *testing.T) {
	// kube-apiserver and etcd, no CRDs.
	env := envtesttest.New(t)
	// hack/offline/envtest.sh builds a kubectl of the API server's version beside it.
	kubectl := filepath.Join(env.BinaryAssetsDirectory, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Fatal("no kubectl in KUBEBUILDER_ASSETS nor on PATH; run hack/offline/envtest.sh")
		}
	}
	bin := proctest.Build(t, repo)
	kubeconfig := proctest.Kubeconfig(t, env, "operator")
	databaseURL := pgtest.NewDatabase(t)

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	run("apply", "-k", filepath.Join(repo, "config", "crd"))
	run("wait", "--for=condition=Established", "crd/clientagreements.evalmeter.io", "--timeout=60s")
	// The whole operator install must be valid for this API server too; a
	// dry run creates no namespace, so that one is made first.
	run("create", "namespace", "evalmeter-system")
	run("apply", "--dry-run=server", "-k", filepath.Join(repo, "config", "default"))

	apiAddr, opsAddr, probeAddr := proctest.FreeAddr(t), proctest.FreeAddr(t), proctest.FreeAddr(t)
	proctest.Start(t, bin, []string{"DATABASE_URL=" + databaseURL, "KUBECONFIG=" + kubeconfig},
		"controller", "--resync=1s", "--health-probe-bind-address="+probeAddr)
	proctest.WaitOK(t, "http://"+probeAddr+"/readyz")
	proctest.Start(t, bin, []string{"DATABASE_URL=" + databaseURL, "EVALMETER_TOKEN_SECRET=" + strings.Repeat("e2e-secret-", 4)},
		"api", "--addr="+apiAddr, "--ops-addr="+opsAddr)
	proctest.WaitOK(t, "http://"+opsAddr+"/readyz")

	run("create", "namespace", "clients")
	run("apply", "-n", "clients", "-k", filepath.Join(repo, "config", "samples"))

	// The operator hands the key over from the Secret.
	var key string
	polltest.Until(t, 30*time.Second, "the API key Secret", func() error {
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", "clients", "get", "secret", "acme-api-key", "-o", "jsonpath={.data.api-key}")
		out, err := cmd.Output()
		if err != nil || len(out) == 0 {
			return fmt.Errorf("not yet: %v", err)
		}
		b, err := base64.StdEncoding.DecodeString(string(out))
		key = string(b)
		return err
	})

	api := "http://" + apiAddr + "/api/svc/v1"
	status, body := call(t, "POST", api+"/sessions", key, "operator-flow-session-1", nil)
	if status != http.StatusCreated {
		t.Fatalf("open session: %d %s", status, body)
	}
	var session struct {
		Session struct{ Token string } `json:"session"`
	}
	json.Unmarshal(body, &session)
	example, err := os.ReadFile(filepath.Join(repo, "api", "examples", "metrics-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if status, body := call(t, "POST", api+"/metrics", session.Session.Token, "operator-flow-metrics-1", example); status != http.StatusOK ||
		!strings.Contains(string(body), `"case_count":3`) {
		t.Fatalf("metrics: %d %s", status, body)
	}
	status, body = call(t, "GET", api+"/usage", key, "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"consumed_hours":1`) || !strings.Contains(string(body), `"remaining_hours":9`) {
		t.Fatalf("usage: %d %s", status, body)
	}

	polltest.Until(t, 30*time.Second, "the agreement's status", func() error {
		out := run("-n", "clients", "get", "clientagreement", "acme", "-o", "jsonpath={.status.phase} {.status.consumedHours} {.status.remainingHours}")
		if out != "Active 1 9" {
			return fmt.Errorf("phase, consumed, remaining = %q", out)
		}
		return nil
	})
	// spec.clientID is a selectable field: the API server filters on it.
	if out := run("get", "cla", "-A", "--field-selector", "spec.clientID=acme", "-o", "name"); out != "clientagreement.evalmeter.io/acme\n" {
		t.Errorf("kubectl get cla --field-selector spec.clientID=acme: %q", out)
	}
	if out := run("get", "cla", "-A", "--field-selector", "spec.clientID=other", "-o", "name"); out != "" {
		t.Errorf("kubectl get cla --field-selector spec.clientID=other: %q", out)
	}
	table := run("-n", "clients", "get", "cla")
	for _, column := range []string{"CLIENT", "ALLOCATED", "CONSUMED", "REMAINING", "VALID-UNTIL", "PHASE", "AGE", "acme"} {
		if !strings.Contains(table, column) {
			t.Errorf("kubectl get cla lacks %s:\n%s", column, table)
		}
	}

	// Deleting the agreement revokes the key: 401 from then on.
	run("-n", "clients", "delete", "clientagreement", "acme", "--wait", "--timeout=60s")
	if status, body := call(t, "GET", api+"/usage", key, "", nil); status != http.StatusUnauthorized {
		t.Errorf("usage after the agreement was deleted: %d %s", status, body)
	}
}

func call(t *testing.T, method, url, bearer, idemKey string, body []byte) (int, []byte) {
	t.Helper()
	status, b, err := request(http.DefaultClient, method, url, bearer, idemKey, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// request sends one API request; bearer and idemKey are left out when empty.
func request(client *http.Client, method, url, bearer, idemKey string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}
