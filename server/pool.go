package server

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector exports the ledger's connection pool statistics at each
// scrape: how full the pool is, and how often and how long requests wait
// for a connection (the first sign that database.maxConns is too small).
type poolCollector struct {
	stat func() *pgxpool.Stat

	conns, maxConns                         *prometheus.Desc
	acquires, acquireSeconds                *prometheus.Desc
	emptyAcquires, emptyWaitSeconds, cancel *prometheus.Desc
}

func newPoolCollector(stat func() *pgxpool.Stat) *poolCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("evalmeter_db_pool_"+name, help, labels, nil)
	}
	return &poolCollector{
		stat:             stat,
		conns:            desc("connections", "PostgreSQL connections of this process's pool, by state.", "state"),
		maxConns:         desc("max_connections", "Most connections the pool may open (--db-max-conns)."),
		acquires:         desc("acquires_total", "Connections acquired from the pool."),
		acquireSeconds:   desc("acquire_seconds_total", "Time spent acquiring connections, waits included."),
		emptyAcquires:    desc("empty_acquires_total", "Acquires that found no idle connection and waited for one to open or be released."),
		emptyWaitSeconds: desc("empty_acquire_wait_seconds_total", "Time spent by acquires that found no idle connection."),
		cancel:           desc("canceled_acquires_total", "Acquires abandoned because the request's context ended."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.maxConns, c.acquires, c.acquireSeconds, c.emptyAcquires, c.emptyWaitSeconds, c.cancel} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(c.conns, gauge, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, gauge, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, gauge, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.maxConns, gauge, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, counter, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.acquireSeconds, counter, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(c.emptyAcquires, counter, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.emptyWaitSeconds, counter, s.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(c.cancel, counter, float64(s.CanceledAcquireCount()))
}
