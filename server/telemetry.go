package server

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// telemetry is the API's Prometheus metrics.
type telemetry struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	sessionsOpened prometheus.Counter
	replays        *prometheus.CounterVec
	pruneRuns      *prometheus.CounterVec
	pruneLastOK    prometheus.Gauge
	pruned         prometheus.Counter
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
		pruneRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evalmeter_prune_runs_total",
			Help: "Hourly prunings of old metrics results by outcome: ok, busy (another replica prunes) or error.",
		}, []string{"result"}),
		// A timestamp, so that an alert on its age fires however the runs
		// fail, even when none ever succeeded (0). Only a run that held the
		// lock and finished sets it: a busy run says nothing of how the
		// other replica's went, which that replica reports.
		pruneLastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "evalmeter_prune_last_success_timestamp_seconds",
			Help: "When this replica last pruned old metrics results itself without error (not when another replica held the lock), in Unix seconds; 0 before the first time.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evalmeter_pruned_results_total",
			Help: "Metrics results deleted for being older than the retention.",
		}),
	}
	for _, result := range []string{"ok", "busy", "error"} {
		t.pruneRuns.WithLabelValues(result) // present at 0, for rate() and alerts
	}
	for _, c := range []prometheus.Collector{t.requests, t.duration, t.sessionsOpened, t.replays, t.pruneRuns, t.pruneLastOK, t.pruned} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func levelFor(status int) slog.Level {
	if status >= http.StatusInternalServerError {
		return slog.LevelError
	}
	return slog.LevelInfo
}
