package relay

import (
	"github.com/eisland/isle/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's Prometheus collectors. A nil *Metrics records nothing.
type Metrics struct {
	published *prometheus.CounterVec
	failures  *prometheus.CounterVec
	fenced    *prometheus.CounterVec
	rescues   *prometheus.CounterVec
	parks     *prometheus.CounterVec
	oldest    *prometheus.GaugeVec
	parked    *prometheus.GaugeVec
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
		parks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_outbox_parked_total",
			Help: "Outbox rows parked because they cannot be published as they are (unknown domain, headers not JSON, object gone), by table.",
		}, []string{"table"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "isle_outbox_oldest_pending_seconds",
			Help: "Age of the oldest row not yet published, parked rows aside, by table; 0 when none waits.",
		}, []string{"table"}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "isle_outbox_parked_rows", Help: "Outbox rows parked now, waiting for an operator to mend and replay them, by table.",
		}, []string{"table"}),
	}
	reg.MustRegister(m.published, m.failures, m.fenced, m.rescues, m.parks, m.oldest, m.parked)
	return m
}

func (m *Metrics) batch(table string, r TableResult) {
	if m == nil {
		return
	}
	m.published.WithLabelValues(table).Add(float64(r.Published))
	m.failures.WithLabelValues(table).Add(float64(r.Failed))
	m.fenced.WithLabelValues(table).Add(float64(r.Fenced))
	m.parks.WithLabelValues(table).Add(float64(r.Parked))
}

func (m *Metrics) backlog(table string, b store.OutboxBacklog) {
	if m == nil {
		return
	}
	m.oldest.WithLabelValues(table).Set(b.Oldest.Seconds())
	m.parked.WithLabelValues(table).Set(float64(b.Parked))
}

func (m *Metrics) rescued(table string, n int) {
	if m == nil {
		return
	}
	m.rescues.WithLabelValues(table).Add(float64(n))
}
