package server_test

import (
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/server"
)

// TestOps: /healthz, /readyz following draining only, and the API's
// Prometheus metrics on /metrics. TestDatabaseOutage covers /readyz with
// PostgreSQL down.
func TestOps(t *testing.T) {
	e := newEnv(t)
	registry := prometheus.NewRegistry()
	tokens := mustSigner(t, 'k')
	store, err := ledger.Open(t.Context(), e.url, ledger.Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := server.New(server.Config{Ledger: store, Tokens: tokens, Now: e.clock.Now, Random: rand.Reader,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: registry})
	if err != nil {
		t.Fatal(err)
	}
	apiServer := httptest.NewServer(srv.Handler())
	defer apiServer.Close()
	a := &api{t: t, url: apiServer.URL, client: apiServer.Client()}
	monitor, err := server.NewPostgresMonitor(e.store.Ping, time.Second, registry, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := monitor.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	ops := &server.Ops{Gatherer: registry}
	opsServer := httptest.NewServer(ops.Handler())
	defer opsServer.Close()
	get := opsGetter(t, opsServer.URL)

	key := e.grant("acme", 2, nil)
	a.mustOpenSession(key, idem("ops"))
	a.mustOpenSession(key, idem("ops")) // a replay
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := get(path); status != 200 {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`evalmeter_sessions_opened_total 1`,
		`evalmeter_idempotent_replays_total{operation="sessions"} 1`,
		`evalmeter_http_requests_total{code="201",method="POST",route="sessions"} 2`,
		`evalmeter_http_request_duration_seconds_bucket{code="201",route="sessions",le="+Inf"} 2`,
		"evalmeter_postgres_up 1",
		"evalmeter_postgres_ping_seconds ",
		"evalmeter_db_pool_max_connections 3",
		`evalmeter_db_pool_connections{state="acquired"} 0`,
		`evalmeter_db_pool_connections{state="idle"} `,
		"evalmeter_db_pool_empty_acquires_total ",
		"evalmeter_db_pool_empty_acquire_wait_seconds_total ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Two session requests took at least two connections each (key, then session).
	m := regexp.MustCompile(`(?m)^evalmeter_db_pool_acquires_total (\d+)$`).FindStringSubmatch(metrics)
	if n, err := strconv.Atoi(m[min(1, len(m)-1)]); m == nil || err != nil || n < 4 {
		t.Errorf("/metrics: pool acquires %v, want 4 or more", m)
	}

	ops.Drain()
	if status, body := get("/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Errorf("/readyz while draining: %d %s", status, body)
	}
	if status, _ := get("/healthz"); status != 200 {
		t.Errorf("/healthz while draining: %d (the process still serves)", status)
	}
}

// opsGetter GETs a path of the ops listener at base: status and body.
func opsGetter(t *testing.T, base string) func(path string) (int, string) {
	return func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// TestHTTPServerBounds: every read, write and header of an API listener is
// bounded, so a slow client cannot hold a connection forever.
func TestHTTPServerBounds(t *testing.T) {
	s := server.HTTPServer(http.NotFoundHandler(), nil)
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("unbounded: %+v", s)
	}
	if s.ReadHeaderTimeout > s.ReadTimeout {
		t.Errorf("ReadHeaderTimeout %s exceeds ReadTimeout %s", s.ReadHeaderTimeout, s.ReadTimeout)
	}
}
