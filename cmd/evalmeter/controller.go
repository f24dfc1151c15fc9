//go:build !customer

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
	"github.com/evalmeter/evalmeter/controllers"
	"github.com/evalmeter/evalmeter/internal/cli"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// runController runs the operator until SIGTERM or SIGINT.
func runController(args []string, stderr io.Writer) int {
	fs := cli.NewFlagSet("controller", "controller [flags]", stderr)
	dbURL := fs.String("database-url", cli.EnvOr("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	metricsAddr := fs.String("metrics-bind-address", cli.EnvOr("EVALMETER_METRICS_ADDR", "0"), "address of the Prometheus metrics endpoint; 0 disables it")
	metricsSecure := fs.Bool("metrics-secure", true,
		"serve metrics over HTTPS to callers authorized to get /metrics (TokenReview, SubjectAccessReview); false serves plain HTTP to anyone, for development")
	metricsCertDir := fs.String("metrics-cert-dir", "", "directory with tls.crt and tls.key for the metrics endpoint, reloaded on change; empty makes a self-signed certificate")
	probeAddr := fs.String("health-probe-bind-address", cli.EnvOr("EVALMETER_PROBE_ADDR", ":8081"), "address of /healthz and /readyz")
	leaderElect := fs.Bool("leader-elect", cli.EnvBool("EVALMETER_LEADER_ELECT"), "elect a leader, so that only one replica reconciles")
	namespaces := fs.String("watch-namespaces", cli.EnvOr("EVALMETER_WATCH_NAMESPACES", ""), "comma-separated namespaces to watch; empty for all")
	resync := fs.Duration("resync", time.Minute, "how often each agreement's ledger figures are refreshed")
	dbTimeout := fs.Duration("db-timeout", ledger.DefaultTimeout, "bound on every database statement")
	maxConns := fs.String("db-max-conns", cli.EnvOr("EVALMETER_DB_MAX_CONNS", "5"), maxConnsUsage)
	lowCredit := fs.String("low-credit-threshold", cli.EnvOr("EVALMETER_LOW_CREDIT_THRESHOLD", "2"),
		"remaining hours at or below which an agreement without spec.lowCreditThreshold reports LowCredit (env EVALMETER_LOW_CREDIT_THRESHOLD)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if status, ok := cli.ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return cli.Failf(stderr, "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if *dbURL == "" {
		return cli.Failf(stderr, "controller: set DATABASE_URL (or --database-url) to the PostgreSQL URL")
	}
	dbMaxConns, err := parseMaxConns(*maxConns)
	if err != nil {
		return cli.Failf(stderr, "controller: %v", err)
	}
	threshold, err := strconv.ParseInt(*lowCredit, 10, 32)
	if err != nil || threshold < 0 {
		return cli.Failf(stderr, "controller: --low-credit-threshold %q: use a whole number of hours, 0 or more", *lowCredit)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr)))
	if err := controller(ctrl.SetupSignalHandler(), controllerConfig{
		databaseURL: *dbURL, probeAddr: *probeAddr, leaderElect: *leaderElect,
		metrics:    controllers.MetricsServing{BindAddress: *metricsAddr, Secure: *metricsSecure, CertDir: *metricsCertDir},
		namespaces: *namespaces, resync: *resync, dbTimeout: *dbTimeout, dbMaxConns: dbMaxConns,
		lowCreditThreshold: int32(threshold),
	}); err != nil {
		ctrl.Log.Error(err, "controller stopped")
		return 1
	}
	return 0
}

type controllerConfig struct {
	databaseURL, probeAddr         string
	metrics                        controllers.MetricsServing
	leaderElect                    bool
	namespaces                     string
	resync, dbTimeout              time.Duration
	dbMaxConns, lowCreditThreshold int32
}

func controller(ctx context.Context, cfg controllerConfig) error {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := ledger.Migrate(mctx, cfg.databaseURL)
	cancel()
	if err != nil {
		return err
	}
	store, err := ledger.Open(ctx, cfg.databaseURL, ledger.Options{Timeout: cfg.dbTimeout, MaxConns: cfg.dbMaxConns})
	if err != nil {
		return err
	}
	defer store.Close()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := evalmeterv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	var namespaces []string
	for ns := range strings.SplitSeq(cfg.namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("Kubernetes configuration: %w", err)
	}
	metricsOptions, metricsCerts, err := cfg.metrics.Options()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(namespaces),
		Metrics:                metricsOptions,
		HealthProbeBindAddress: cfg.probeAddr,
		LeaderElection:         cfg.leaderElect,
		LeaderElectionID:       "evalmeter-controller.evalmeter.io",
	})
	if err != nil {
		return err
	}
	if err := (&controllers.ClientAgreementReconciler{
		Client:   mgr.GetClient(),
		Ledger:   store,
		Recorder: mgr.GetEventRecorder("evalmeter-controller"),
		Now:      time.Now,
		Random:   rand.Reader,
		Resync:   cfg.resync,

		LowCreditThreshold: cfg.lowCreditThreshold,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if metricsCerts != nil {
		if err := mgr.Add(metricsCerts); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ledger", func(r *http.Request) error { return store.Ping(r.Context()) }); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
