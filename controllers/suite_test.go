package controllers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
	"github.com/evalmeter/evalmeter/controllers"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/poll"
	"github.com/evalmeter/evalmeter/server"
)

// The suite runs one real kube-apiserver and etcd (envtest), one
// PostgreSQL cluster and the manager with the reconciler, shared by the
// tests, which run one after the other (one stops PostgreSQL).
var (
	k8sClient client.Client
	store     *ledger.Store
	pg        *pgtest.Cluster
	dbURL     string
	apiURL    string // the evalmeter API on the same ledger, for 401 and 403
	// managerCache is the manager's cache, to check what it holds.
	managerCache cache.Cache
	// restConfig is envtest's admin configuration; controllerIdentity is
	// it impersonating the chart's controller ServiceAccount.
	restConfig, controllerIdentity *rest.Config
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// Errors only, without stack traces: the outage test makes many.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.PanicLevel)))
	env, err := newEnvtest()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest binaries:", err)
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer env.Stop()
	restConfig = cfg

	dir, err := os.MkdirTemp("", "evalmeter-controllers-pg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Chmod(dir, 0o755)
	if pg, err = pgtest.Start(dir); err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		return 1
	}
	defer pg.Close()
	dbURL = pg.URL()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ledger.Migrate(ctx, dbURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if store, err = ledger.Open(ctx, dbURL, ledger.Options{Timeout: 2 * time.Second}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close()

	// The manager runs as the chart's ServiceAccount (watching every
	// namespace), with the RBAC the chart renders.
	if controllerIdentity, err = asChartServiceAccount(ctx, cfg, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := newManager(controllerIdentity, store, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	managerCache = mgr.GetCache()
	// A direct client, not the manager's cache: tests read what is stored.
	if k8sClient, err = client.New(cfg, client.Options{Scheme: mgr.GetScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tokens, err := credential.NewTokenSigner([]byte(strings.Repeat("controller-suite", 2)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := server.New(server.Config{Ledger: store, Tokens: tokens, Now: time.Now, Random: rand.Reader,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	api := httptest.NewServer(srv.Handler())
	defer api.Close()
	apiURL = api.URL + "/api/svc/v1"

	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// newManager is a manager running the reconciler on db as cfg's identity,
// watching namespaces (all when nil), with a 2 s resync.
func newManager(cfg *rest.Config, db *ledger.Store, namespaces []string) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	clientgoscheme.AddToScheme(scheme)
	evalmeterv1alpha1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(namespaces),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests may run a second manager, with a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	err = (&controllers.ClientAgreementReconciler{
		Client:   mgr.GetClient(),
		Ledger:   db,
		Recorder: mgr.GetEventRecorder("evalmeter-controller"),
		Now:      time.Now,
		Random:   rand.Reader,
		Resync:   2 * time.Second,

		LowCreditThreshold: 1,
	}).SetupWithManager(mgr)
	return mgr, err
}

// newEnvtest is a kube-apiserver and etcd with the CRD installed.
func newEnvtest() (*envtest.Environment, error) {
	assets, err := envtestAssets()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}, nil
}

// envtestAssets is KUBEBUILDER_ASSETS, or the directory hack/offline/envtest.sh
// builds the binaries into.
func envtestAssets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join("..", "hack", "offline", "envtest.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// namespace creates a namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	name = strings.NewReplacer("/", "-", " ", "-").Replace(name)
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name, "-") + "-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// usageStatus is the status of GET /usage with key.
func usageStatus(t *testing.T, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, apiURL+"/usage", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// event waits for an event with reason about the agreement ns/name and
// returns its message.
func event(t *testing.T, ns, name, reason string) string {
	t.Helper()
	var note string
	poll.Until(t, wait, "event "+reason, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				note = e.Note
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s", len(list.Items), reason)
	})
	return note
}

// waitReady waits for the agreement's Ready condition to have reason and a
// message containing text.
func waitReady(t *testing.T, ns, name, reason, text string) {
	t.Helper()
	poll.Until(t, wait, "Ready reason "+reason, func() error {
		r := meta.FindStatusCondition(get(t, ns, name).Status.Conditions, evalmeterv1alpha1.ConditionReady)
		if r == nil || r.Reason != reason || !strings.Contains(r.Message, text) {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
}

// openSession opens a session on the API with key and returns its token.
func openSession(t *testing.T, key string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, apiURL+"/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "controllers-"+rand.Text())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Session struct{ Token string } `json:"session"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("opening a session: %d, %v", resp.StatusCode, err)
	}
	return body.Session.Token
}

// postMetricsStatus is the status of a small POST /metrics with token.
func postMetricsStatus(t *testing.T, token string) int {
	t.Helper()
	body := `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1}]}`
	req, _ := http.NewRequest(http.MethodPost, apiURL+"/metrics", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "controllers-"+rand.Text())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
