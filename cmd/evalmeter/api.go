//go:build !customer

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/evalmeter/evalmeter/internal/cli"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/tracing"
	"github.com/evalmeter/evalmeter/receipt"
	"github.com/evalmeter/evalmeter/server"
)

// apiConfig is evalmeter api's configuration, from flags and environment.
type apiConfig struct {
	addr, opsAddr     string
	databaseURL       string
	migrate           bool
	tokenSecrets      [][]byte // current first
	tlsCert, tlsKey   string
	dbTimeout         time.Duration
	dbMaxConns        int32 // 0: pgx's default
	drainDelay, grace time.Duration
	logLevel          slog.Level
	// trustTraceContext: a caller's traceparent is the parent of its
	// request's span (a proxy in front sets it), not just linked to.
	trustTraceContext bool
	// receipts signs metrics responses, nil when no key is configured;
	// receiptKeys is the published key set.
	receipts    *receipt.Signer
	receiptKeys *receipt.KeySet
	publicURL   string
}

func parseAPIConfig(args []string, stderr io.Writer) (*apiConfig, error) {
	fs := cli.NewFlagSet("api", "api [flags]", stderr)
	c := &apiConfig{}
	fs.StringVar(&c.addr, "addr", cli.EnvOr("EVALMETER_ADDR", ":8080"), "API listen address (env EVALMETER_ADDR)")
	fs.StringVar(&c.opsAddr, "ops-addr", cli.EnvOr("EVALMETER_OPS_ADDR", ":9090"), "listen address of /healthz, /readyz and /metrics (env EVALMETER_OPS_ADDR)")
	fs.StringVar(&c.databaseURL, "database-url", cli.EnvOr("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	fs.BoolVar(&c.migrate, "migrate", cli.EnvBool("EVALMETER_MIGRATE"), "apply database migrations before serving (env EVALMETER_MIGRATE)")
	secretFile := fs.String("token-secret-file", cli.EnvOr("EVALMETER_TOKEN_SECRET_FILE", ""), "file holding the session token secret (env EVALMETER_TOKEN_SECRET_FILE); else env EVALMETER_TOKEN_SECRET")
	previousFile := fs.String("token-secret-previous-file", cli.EnvOr("EVALMETER_TOKEN_SECRET_PREVIOUS_FILE", ""), "file holding the previous session token secret, still accepted during a rotation (env EVALMETER_TOKEN_SECRET_PREVIOUS_FILE); else env EVALMETER_TOKEN_SECRET_PREVIOUS")
	fs.StringVar(&c.tlsCert, "tls-cert", cli.EnvOr("EVALMETER_TLS_CERT", ""), "serve HTTPS with this certificate (PEM); needed where no ingress terminates TLS")
	fs.StringVar(&c.tlsKey, "tls-key", cli.EnvOr("EVALMETER_TLS_KEY", ""), "private key of --tls-cert (PEM)")
	fs.DurationVar(&c.dbTimeout, "db-timeout", ledger.DefaultTimeout, "bound on every database statement; past it the API answers 503")
	maxConns := fs.String("db-max-conns", cli.EnvOr("EVALMETER_DB_MAX_CONNS", "10"), maxConnsUsage)
	fs.DurationVar(&c.drainDelay, "drain-delay", 0, "on SIGTERM, how long /readyz fails before the server stops accepting (lets load balancers notice)")
	fs.DurationVar(&c.grace, "shutdown-grace", 25*time.Second, "on SIGTERM, how long in-flight requests may take to finish")
	level := fs.String("log-level", cli.EnvOr("EVALMETER_LOG_LEVEL", "info"), "debug, info, warn or error")
	fs.BoolVar(&c.trustTraceContext, "trust-trace-context", cli.EnvBool("EVALMETER_TRUST_TRACE_CONTEXT"),
		"with tracing, make a caller's W3C traceparent (and its sampled flag) the parent of its request's span, only behind a proxy that sets it; by default each request starts a new trace linked to it (env EVALMETER_TRUST_TRACE_CONTEXT)")
	var receiptKeys receiptKeyFlags
	receiptKeys.register(fs)
	fs.StringVar(&c.publicURL, "public-url", cli.EnvOr("EVALMETER_PUBLIC_URL", ""),
		"the base URL clients use (e.g. https://evalmeter.example.com), when TLS ends or the path is rewritten in front of the API: receipts sign the request's URI under it (env EVALMETER_PUBLIC_URL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	var problems []string
	if c.databaseURL == "" {
		problems = append(problems, "set DATABASE_URL (or --database-url) to the PostgreSQL URL")
	}
	secret, err := readSecret("EVALMETER_TOKEN_SECRET", "--token-secret-file", *secretFile)
	if err != nil {
		problems = append(problems, err.Error())
	} else if len(secret) < credential.MinSecretBytes {
		problems = append(problems, fmt.Sprintf("set EVALMETER_TOKEN_SECRET (or --token-secret-file) to at least %d random bytes, e.g. $(head -c 32 /dev/urandom | base64)", credential.MinSecretBytes))
	}
	c.tokenSecrets = [][]byte{secret}
	// The previous secret is optional: empty means no rotation under way.
	previous, err := readSecret("EVALMETER_TOKEN_SECRET_PREVIOUS", "--token-secret-previous-file", *previousFile)
	switch {
	case err != nil:
		problems = append(problems, err.Error())
	case len(previous) > 0 && len(previous) < credential.MinSecretBytes:
		problems = append(problems, fmt.Sprintf("the previous token secret (EVALMETER_TOKEN_SECRET_PREVIOUS or --token-secret-previous-file) is %d bytes; it needs at least %d, or leave it empty", len(previous), credential.MinSecretBytes))
	case len(previous) > 0:
		c.tokenSecrets = append(c.tokenSecrets, previous)
	}
	if c.dbMaxConns, err = parseMaxConns(*maxConns); err != nil {
		problems = append(problems, err.Error())
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		problems = append(problems, "set both --tls-cert and --tls-key, or neither")
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		problems = append(problems, fmt.Sprintf("--log-level %q: use debug, info, warn or error", *level))
	}
	if c.dbTimeout <= 0 || c.grace <= 0 || c.drainDelay < 0 {
		problems = append(problems, "--db-timeout and --shutdown-grace must be positive, --drain-delay not negative")
	}
	if c.receipts, c.receiptKeys, err = receiptKeys.load(); err != nil {
		problems = append(problems, err.Error())
	}
	if err := parsePublicURL(c.publicURL); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n  "))
	}
	return c, nil
}

// readSecret returns a token secret: the content of file when it is named
// (a mounted Secret), white space around it trimmed (the newline of `echo`),
// else the environment variable env as it is, as before files existed: a
// secret that changed would end every open session. flag names the file's
// flag in errors.
func readSecret(env, flag, file string) ([]byte, error) {
	if file == "" {
		return []byte(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return bytes.TrimSpace(b), nil
}

// serveAPI runs evalmeter api until SIGTERM or SIGINT, then drains.
func serveAPI(args []string, stderr io.Writer) int {
	cfg, err := parseAPIConfig(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return cli.Failf(stderr, "api: configuration:\n  %v", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler())) // certwatcher's
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := runAPI(ctx, cfg, log); err != nil {
		log.Error("api stopped", "error", err)
		return 1
	}
	return 0
}

// postgresPingInterval is how often the API checks PostgreSQL for its
// metric and log line.
const postgresPingInterval = 5 * time.Second

func runAPI(ctx context.Context, cfg *apiConfig, log *slog.Logger) error {
	if cfg.migrate {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := ledger.Migrate(mctx, cfg.databaseURL)
		cancel()
		if err != nil {
			return err
		}
		log.Info("database migrated")
	}
	// Tracing, when OTEL_* asks for it, is flushed last: after the drain,
	// the last requests' spans included.
	tr, err := tracing.Setup(ctx, version)
	if err != nil {
		return err
	}
	var tp trace.TracerProvider // nil: no tracing
	var propagator propagation.TextMapPropagator
	if tr != nil {
		defer func() {
			if err := tr.Shutdown(context.Background()); err != nil {
				log.Warn("tracing at exit", "error", err)
			}
		}()
		// The exporters report through OpenTelemetry's globals: into our log.
		otel.SetLogger(logr.FromSlogHandler(log.Handler()))
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("exporting spans failed", "error", err) }))
		tp, propagator = tr.Provider, tr.Propagator
		log.Info("tracing on", "exporter", tr.Exporter, "protocol", tr.Protocol, "endpoint", tr.Endpoint)
	}
	store, err := ledger.Open(ctx, cfg.databaseURL, ledger.Options{Timeout: cfg.dbTimeout, MaxConns: cfg.dbMaxConns, TracerProvider: tp})
	if err != nil {
		return err
	}
	defer store.Close()
	tokens, err := credential.NewTokenSigner(cfg.tokenSecrets[0], cfg.tokenSecrets[1:]...)
	if err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := server.New(server.Config{
		Ledger: store, Tokens: tokens, Now: time.Now, Random: rand.Reader, Logger: log, Registry: registry,
		TracerProvider: tp, Propagator: propagator, TrustTraceContext: cfg.trustTraceContext,
		Receipts: cfg.receipts, ReceiptKeys: cfg.receiptKeys, PublicURL: cfg.publicURL,
	})
	if err != nil {
		return err
	}
	monitor, err := server.NewPostgresMonitor(store.Ping, cfg.dbTimeout, registry, log)
	if err != nil {
		return err
	}
	ops := &server.Ops{Gatherer: registry}

	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	apiServer := server.HTTPServer(srv.Handler(), errorLog)
	opsServer := &http.Server{
		Handler:           ops.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          errorLog,
	}

	// Background work runs through the drain, until runAPI returns.
	bg, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	defer background.Wait()
	defer stopBackground()
	if cfg.tlsCert != "" {
		// Reloaded when the files change (cert-manager renews in place),
		// with a poll every 10 s behind the file watch.
		certs, err := certwatcher.New(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert and --tls-key: %w", err)
		}
		certs.RegisterCallback(func(c tls.Certificate) {
			if c.Leaf != nil {
				log.Info("serving TLS certificate loaded", "subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter)
			}
		})
		apiServer.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
		background.Go(func() {
			if err := certs.Start(bg); err != nil {
				log.Error("watching the TLS certificate files failed; a renewed certificate will not be served until a restart", "error", err)
			}
		})
	}
	background.Go(func() { monitor.Run(bg, postgresPingInterval) })
	background.Go(func() { srv.PruneMetrics(bg, time.Hour) })

	apiListener, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	opsListener, err := net.Listen("tcp", cfg.opsAddr)
	if err != nil {
		apiListener.Close()
		return err
	}

	serveErr := make(chan error, 2)
	go func() {
		var err error
		if cfg.tlsCert != "" {
			err = apiServer.ServeTLS(apiListener, "", "") // certificates from TLSConfig
		} else {
			err = apiServer.Serve(apiListener)
		}
		serveErr <- err
	}()
	go func() { serveErr <- opsServer.Serve(opsListener) }()
	log.Info("serving", "addr", apiListener.Addr().String(), "ops_addr", opsListener.Addr().String(), "tls", cfg.tlsCert != "")
	if cfg.receipts != nil {
		log.Info("signing metrics responses", "receipt_key_id", cfg.receipts.KeyID(), "published_keys", len(cfg.receiptKeys.Keys), "public_url", cfg.publicURL)
	} else {
		log.Warn("metrics responses are not signed: no receipt key (--receipt-key-file); customers get no receipt a third party can check")
	}

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	log.Info("draining", "drain_delay", cfg.drainDelay.String(), "grace", cfg.grace.String())
	ops.Drain()
	time.Sleep(cfg.drainDelay)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.grace)
	defer cancel()
	err = apiServer.Shutdown(shutdownCtx)
	opsServer.Shutdown(shutdownCtx)
	if err != nil {
		return fmt.Errorf("in-flight requests did not finish within %s: %w", cfg.grace, err)
	}
	log.Info("stopped")
	return nil
}
