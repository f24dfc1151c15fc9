package controllers_test

import (
	"context"
	"crypto/rand"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// Errors only, without stack traces: the outage test makes many.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.PanicLevel)))
	assets, err := envtestAssets()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest binaries:", err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer env.Stop()

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
	if store, err = ledger.Open(ctx, dbURL, 2*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close()

	scheme := runtime.NewScheme()
	clientgoscheme.AddToScheme(scheme)
	evalmeterv1alpha1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&controllers.ClientAgreementReconciler{
		Client:   mgr.GetClient(),
		Ledger:   store,
		Recorder: mgr.GetEventRecorder("evalmeter-controller"),
		Now:      time.Now,
		Random:   rand.Reader,
		Resync:   2 * time.Second,
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A direct client, not the manager's cache: tests read what is stored.
	if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
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

// envtestAssets is KUBEBUILDER_ASSETS, or the directory hack/envtest.sh
// builds the binaries into.
func envtestAssets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join("..", "hack", "envtest.sh"))
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

// event waits for an event with reason about the agreement ns/name.
func event(t *testing.T, ns, name, reason string) {
	t.Helper()
	poll.Until(t, wait, "event "+reason, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s", len(list.Items), reason)
	})
}
