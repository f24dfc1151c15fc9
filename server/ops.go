package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Ops is the operations listener's handler: /healthz (the process
// serves), /readyz (it serves and is not draining) and /metrics
// (Prometheus).
//
// /readyz does not follow PostgreSQL. While PostgreSQL is down every pod
// would fail it at once and leave the Service: clients would get the
// ingress's own 502, without the error envelope or Retry-After, instead of
// the API's 503. PostgreSQL's health is a metric and a log line instead
// (PostgresMonitor).
type Ops struct {
	Gatherer prometheus.Gatherer
	draining atomic.Bool
}

// Drain makes /readyz fail, so that load balancers stop sending requests
// before the server shuts down.
func (o *Ops) Drain() { o.draining.Store(true) }

func (o *Ops) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if o.draining.Load() {
			http.Error(w, "not ready: draining", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	return mux
}

// PostgresMonitor pings PostgreSQL in the background and publishes the
// result: the gauges evalmeter_postgres_up and
// evalmeter_postgres_ping_seconds, and one log line each time PostgreSQL
// goes down (with the error) or comes back.
type PostgresMonitor struct {
	ping    func(context.Context) error
	timeout time.Duration
	log     *slog.Logger
	up      prometheus.Gauge
	seconds prometheus.Gauge

	mu   sync.Mutex
	down bool // as last logged; up until a ping fails
}

// NewPostgresMonitor registers the monitor's gauges with reg. Each ping is
// bounded by timeout.
func NewPostgresMonitor(ping func(context.Context) error, timeout time.Duration, reg prometheus.Registerer, log *slog.Logger) (*PostgresMonitor, error) {
	m := &PostgresMonitor{
		ping:    ping,
		timeout: timeout,
		log:     log,
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "evalmeter_postgres_up",
			Help: "1 when the last ping of PostgreSQL succeeded, 0 when it failed.",
		}),
		seconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "evalmeter_postgres_ping_seconds",
			Help: "How long the last ping of PostgreSQL took, failed or not.",
		}),
	}
	for _, c := range []prometheus.Collector{m.up, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Run pings every interval, from now until ctx ends.
func (m *PostgresMonitor) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		m.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check pings once, updates the gauges and logs a change of state. It
// returns the ping's error.
func (m *PostgresMonitor) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	start := time.Now()
	err := m.ping(ctx)
	m.seconds.Set(time.Since(start).Seconds())
	if err != nil && ctx.Err() == context.Canceled {
		return err // shutting down: says nothing of PostgreSQL
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	down := err != nil
	switch {
	case down && !m.down:
		m.log.Error("PostgreSQL is unreachable; the API answers 503 until it is back", "error", err)
	case !down && m.down:
		m.log.Info("PostgreSQL is reachable again")
	}
	m.down = down
	if down {
		m.up.Set(0)
	} else {
		m.up.Set(1)
	}
	return err
}
