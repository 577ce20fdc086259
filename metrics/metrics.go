// Package metrics is the Prometheus metrics of a runner and its store:
// jobs by state, attempts by class, status queries by outcome, commit and
// attempt latency, queue lag. It is its own package so that an
// application importing api links no Prometheus client; a runner that
// serves metrics (idemrun run) wires it in: New over the store,
// ObserveEvent as runner.Config.OnEvent, and WatchHosts over the runner.
// The metric names and labels are listed in docs/admin-api.md.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemrun/idemrun/store"
)

// Metrics are the Prometheus metrics of a runner and its database. Labels
// are states, classes, outcomes and target hosts (the busiest TopHosts,
// the rest as one): never URLs, keys or header values.
type Metrics struct {
	reg       *prometheus.Registry
	attempts  *prometheus.CounterVec
	queries   *prometheus.CounterVec
	attemptD  prometheus.Histogram
	commitD   prometheus.Histogram
	commitOps prometheus.Histogram
}

// New builds the metrics of the store s. Jobs by state and queue lag are
// read at scrape time (Stats and OldestDue). Commit timing is observed
// when s reports its commits (store.CommitObserver); the commit metrics
// stay empty otherwise.
func New(s store.Jobs) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idemrun_attempts_total", Help: "Attempts finished, by class.",
	}, []string{"class"})
	m.queries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idemrun_status_queries_total", Help: "Status queries finished, by outcome.",
	}, []string{"outcome"})
	m.attemptD = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "idemrun_attempt_duration_seconds", Help: "Duration of one attempt, from claim to outcome.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	})
	m.commitD = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "idemrun_commit_duration_seconds", Help: "Duration of one write transaction of the store (group commit).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	m.commitOps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "idemrun_commit_operations", Help: "Operations per committed write transaction.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	jobs := prometheus.NewDesc("idemrun_jobs", "Jobs by state.", []string{"state"}, nil)
	lag := prometheus.NewDesc("idemrun_queue_lag_seconds", "Now minus the oldest due next_run_at among pending jobs (0 when none is due).", nil, nil)
	m.reg.MustRegister(m.attempts, m.queries, m.attemptD, m.commitD, m.commitOps,
		collectorFunc{descs: []*prometheus.Desc{jobs, lag}, collect: func(ch chan<- prometheus.Metric) {
			if st, err := s.Stats(); err == nil {
				for s, n := range st {
					ch <- prometheus.MustNewConstMetric(jobs, prometheus.GaugeValue, float64(n), string(s))
				}
			}
			l := 0.0
			if t, err := s.OldestDue(store.StatePending); err == nil && !t.IsZero() {
				if d := time.Since(t); d > 0 {
					l = d.Seconds()
				}
			}
			ch <- prometheus.MustNewConstMetric(lag, prometheus.GaugeValue, l)
		}})
	for _, cl := range []string{"succeeded", "no_effect", "permanent", "unknown", "in_progress", "key_mismatch"} {
		m.attempts.WithLabelValues(cl)
	}
	if co, ok := s.(store.CommitObserver); ok {
		co.SetCommitObserver(func(d time.Duration, ops int) {
			m.commitD.Observe(d.Seconds())
			m.commitOps.Observe(float64(ops))
		})
	}
	return m
}

// Observe records the last event of j, as if a runner write had just
// closed it. A write that closes nothing (a park once status queries are
// over) would count that event again: use ObserveEvent as
// runner.Config.OnEvent instead.
func (m *Metrics) Observe(j *store.Job) {
	if len(j.History) == 0 {
		return
	}
	m.ObserveEvent(j, j.History[len(j.History)-1])
}

// ObserveEvent records an event a runner write added or closed. It is
// runner.Config.OnEvent.
func (m *Metrics) ObserveEvent(_ *store.Job, e store.Event) {
	switch e.Kind {
	case store.EventAttempt:
		if !e.End.IsZero() {
			m.attempts.WithLabelValues(e.Class).Inc()
			m.attemptD.Observe(e.End.Sub(e.Start).Seconds())
		}
	case store.EventStatusQuery:
		m.queries.WithLabelValues(e.Outcome).Inc()
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
