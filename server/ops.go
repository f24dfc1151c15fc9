package server

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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
