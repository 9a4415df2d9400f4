package relay

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the relay's Prometheus collectors. A nil *Metrics records nothing.
type Metrics struct {
	published *prometheus.CounterVec
	failures  *prometheus.CounterVec
	fenced    *prometheus.CounterVec
	rescues   *prometheus.CounterVec
	oldest    *prometheus.GaugeVec
}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_outbox_published_total", Help: "Outbox rows published (confirmed by the broker and marked), by table.",
		}, []string{"table"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_outbox_publish_failures_total", Help: "Outbox rows whose publish failed and that wait for a later claim, by table.",
		}, []string{"table"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_outbox_fenced_total",
			Help: "Outbox rows published whose claim another relay had taken over when they were marked (their message went out twice), by table.",
		}, []string{"table"}),
		rescues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_outbox_rescued_total",
			Help: "Outbox rows put back before their lease ended because the relay that claimed them was gone, by table.",
		}, []string{"table"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "isle_outbox_oldest_pending_seconds", Help: "Age of the oldest row not yet published, by table; 0 when none waits.",
		}, []string{"table"}),
	}
	reg.MustRegister(m.published, m.failures, m.fenced, m.rescues, m.oldest)
	return m
}

func (m *Metrics) batch(table string, r TableResult) {
	if m == nil {
		return
	}
	m.published.WithLabelValues(table).Add(float64(r.Published))
	m.failures.WithLabelValues(table).Add(float64(r.Failed))
	m.fenced.WithLabelValues(table).Add(float64(r.Fenced))
}

func (m *Metrics) oldestPending(table string, seconds float64) {
	if m == nil {
		return
	}
	m.oldest.WithLabelValues(table).Set(seconds)
}

func (m *Metrics) rescued(table string, n int) {
	if m == nil {
		return
	}
	m.rescues.WithLabelValues(table).Add(float64(n))
}
