package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
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
	drainDelay, grace time.Duration
	logLevel          slog.Level
}

func parseAPIConfig(args []string, stderr io.Writer) (*apiConfig, error) {
	fs := newFlagSet("api", "api [flags]", stderr)
	c := &apiConfig{}
	fs.StringVar(&c.addr, "addr", envOr("EVALMETER_ADDR", ":8080"), "API listen address (env EVALMETER_ADDR)")
	fs.StringVar(&c.opsAddr, "ops-addr", envOr("EVALMETER_OPS_ADDR", ":9090"), "listen address of /healthz, /readyz and /metrics (env EVALMETER_OPS_ADDR)")
	fs.StringVar(&c.databaseURL, "database-url", envOr("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	fs.BoolVar(&c.migrate, "migrate", envBool("EVALMETER_MIGRATE"), "apply database migrations before serving (env EVALMETER_MIGRATE)")
	secretFile := fs.String("token-secret-file", envOr("EVALMETER_TOKEN_SECRET_FILE", ""), "file holding the session token secret; else env EVALMETER_TOKEN_SECRET")
	fs.StringVar(&c.tlsCert, "tls-cert", envOr("EVALMETER_TLS_CERT", ""), "serve HTTPS with this certificate (PEM); needed where no ingress terminates TLS")
	fs.StringVar(&c.tlsKey, "tls-key", envOr("EVALMETER_TLS_KEY", ""), "private key of --tls-cert (PEM)")
	fs.DurationVar(&c.dbTimeout, "db-timeout", ledger.DefaultTimeout, "bound on every database statement; past it the API answers 503")
	fs.DurationVar(&c.drainDelay, "drain-delay", 0, "on SIGTERM, how long /readyz fails before the server stops accepting (lets load balancers notice)")
	fs.DurationVar(&c.grace, "shutdown-grace", 25*time.Second, "on SIGTERM, how long in-flight requests may take to finish")
	level := fs.String("log-level", envOr("EVALMETER_LOG_LEVEL", "info"), "debug, info, warn or error")
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
	secret := []byte(os.Getenv("EVALMETER_TOKEN_SECRET"))
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--token-secret-file: %v", err))
		}
		secret = []byte(strings.TrimSpace(string(b)))
	}
	if len(secret) < credential.MinSecretBytes {
		problems = append(problems, fmt.Sprintf("set EVALMETER_TOKEN_SECRET (or --token-secret-file) to at least %d random bytes, e.g. $(head -c 32 /dev/urandom | base64)", credential.MinSecretBytes))
	}
	c.tokenSecrets = [][]byte{secret}
	if prev := os.Getenv("EVALMETER_TOKEN_SECRET_PREVIOUS"); prev != "" {
		c.tokenSecrets = append(c.tokenSecrets, []byte(prev))
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
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n  "))
	}
	return c, nil
}

// serveAPI runs evalmeter api until SIGTERM or SIGINT, then drains.
func serveAPI(args []string, stderr io.Writer) int {
	cfg, err := parseAPIConfig(args, stderr)
	if err != nil {
		return failf(stderr, "api: configuration:\n  %v", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := runAPI(ctx, cfg, log); err != nil {
		log.Error("api stopped", "error", err)
		return 1
	}
	return 0
}

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
	store, err := ledger.Open(ctx, cfg.databaseURL, cfg.dbTimeout)
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
	})
	if err != nil {
		return err
	}
	ops := &server.Ops{Ping: store.Ping, Gatherer: registry}

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
	apiListener, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	opsListener, err := net.Listen("tcp", cfg.opsAddr)
	if err != nil {
		apiListener.Close()
		return err
	}

	pruneCtx, stopPrune := context.WithCancel(context.Background())
	defer stopPrune()
	go srv.PruneMetrics(pruneCtx, time.Hour)

	serveErr := make(chan error, 2)
	go func() {
		var err error
		if cfg.tlsCert != "" {
			err = apiServer.ServeTLS(apiListener, cfg.tlsCert, cfg.tlsKey)
		} else {
			err = apiServer.Serve(apiListener)
		}
		serveErr <- err
	}()
	go func() { serveErr <- opsServer.Serve(opsListener) }()
	log.Info("serving", "addr", apiListener.Addr().String(), "ops_addr", opsListener.Addr().String(), "tls", cfg.tlsCert != "")

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
