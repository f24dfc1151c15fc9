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

func levelFor(status int) slog.Level {
	if status >= http.StatusInternalServerError {
		return slog.LevelError
	}
	return slog.LevelInfo
}
