package reconcile

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reconciler's Prometheus collectors; nil records nothing.
type Metrics struct {
	runs    *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	counts  *prometheus.CounterVec
}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_reconcile_runs_total", Help: "Job runs by job and result (ok, error, busy).",
		}, []string{"job", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "isle_reconcile_run_seconds", Help: "Duration of job runs.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}, []string{"job"}),
		counts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_reconcile_items_total",
			Help: "What job runs did, by job and item (users_scanned, pending_applied, drift_found, adjustments, ...).",
		}, []string{"job", "item"}),
	}
	reg.MustRegister(m.runs, m.seconds, m.counts)
	return m
}

func (m *Metrics) run(job, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(job, result).Inc()
	if result != "busy" {
		m.seconds.WithLabelValues(job).Observe(took.Seconds())
	}
}

func (m *Metrics) add(job, item string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.counts.WithLabelValues(job, item).Add(float64(n))
}
