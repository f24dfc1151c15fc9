package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// telemetry is the API's Prometheus metrics.
type telemetry struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	sessionsOpened prometheus.Counter
	replays        *prometheus.CounterVec
}

func newTelemetry(reg prometheus.Registerer) (*telemetry, error) {
	t := &telemetry{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evalmeter_http_requests_total",
			Help: "API requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evalmeter_http_request_duration_seconds",
			Help:    "API request latency by route and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "code"}),
		// Each session opened consumes exactly one credit, so this counts
		// credits consumed as well.
		sessionsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evalmeter_sessions_opened_total",
			Help: "Sessions opened; each consumed one evaluation-hour credit.",
		}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evalmeter_idempotent_replays_total",
			Help: "Responses replayed for a retried Idempotency-Key, by operation.",
		}, []string{"operation"}),
	}
	for _, c := range []prometheus.Collector{t.requests, t.duration, t.sessionsOpened, t.replays} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Ops is the operations listener's handler: /healthz (the process
// serves), /readyz (it can reach PostgreSQL and is not draining) and
// /metrics (Prometheus).
type Ops struct {
	Ping     func(context.Context) error
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
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		err := o.Ping(ctx)
		if o.draining.Load() {
			err = errors.New("draining")
		}
		if err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	return mux
}

func levelFor(status int) slog.Level {
	if status >= http.StatusInternalServerError {
		return slog.LevelError
	}
	return slog.LevelInfo
}
