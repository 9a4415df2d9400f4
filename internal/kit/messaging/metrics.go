package messaging

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one delivery, the "outcome" label of isle_messages_total.
const (
	OutcomeOK       = "ok"       // handled and acked
	OutcomeRetried  = "retried"  // copied to the retry queue
	OutcomeDead     = "dead"     // copied to the DLQ
	OutcomeFailed   = "failed"   // failed where the domain has no retry (logged and counted only)
	OutcomeRequeued = "requeued" // could not be copied; nacked back to its queue
	OutcomeStored   = "stored"   // a dead message written to its MySQL table
)

// Metrics are the messaging layer's Prometheus collectors. A nil *Metrics
// records nothing.
type Metrics struct {
	messages       *prometheus.CounterVec
	handlerSeconds *prometheus.HistogramVec
	publishes      *prometheus.CounterVec
	publishSeconds *prometheus.HistogramVec
}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_messages_total",
			Help: "Deliveries handled, by domain and outcome (ok, retried, dead, failed, requeued, stored).",
		}, []string{"domain", "outcome"}),
		handlerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "isle_handler_duration_seconds",
			Help:    "Time a delivery spent in its handler, by domain.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"domain"}),
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_published_total",
			Help: "Publishes by exchange, routing key and result (confirmed, unconfirmed, error).",
		}, []string{"exchange", "routing_key", "result"}),
		publishSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "isle_publish_duration_seconds",
			Help:    "Time from publish to the broker's confirm, by exchange.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2.5, 12),
		}, []string{"exchange"}),
	}
	reg.MustRegister(m.messages, m.handlerSeconds, m.publishes, m.publishSeconds)
	return m
}

// outcomes are the outcomes a delivery can have, in domainMetrics.counts'
// order.
var outcomes = [...]string{OutcomeOK, OutcomeRetried, OutcomeDead, OutcomeFailed, OutcomeRequeued, OutcomeStored}

// domainMetrics are one domain's collectors, each looked up by its labels
// once, at its first use (a series appears once it counts something),
// rather than at each delivery.
type domainMetrics struct {
	m       *Metrics
	domain  string
	counts  [len(outcomes)]atomic.Value // prometheus.Counter
	seconds atomic.Value                // prometheus.Observer
}

// forDomain returns domain's collectors; nil for a nil m.
func (m *Metrics) forDomain(domain string) *domainMetrics {
	if m == nil {
		return nil
	}
	return &domainMetrics{m: m, domain: domain}
}

func (dm *domainMetrics) handled(outcome string, took time.Duration) {
	if dm == nil {
		return
	}
	i := slices.Index(outcomes[:], outcome)
	if i < 0 {
		dm.m.messages.WithLabelValues(dm.domain, outcome).Inc()
	} else {
		c, ok := dm.counts[i].Load().(prometheus.Counter)
		if !ok {
			c = dm.m.messages.WithLabelValues(dm.domain, outcome)
			dm.counts[i].Store(c)
		}
		c.Inc()
	}
	o, ok := dm.seconds.Load().(prometheus.Observer)
	if !ok {
		o = dm.m.handlerSeconds.WithLabelValues(dm.domain)
		dm.seconds.Store(o)
	}
	o.Observe(took.Seconds())
}

func (m *Metrics) published(exchange, routingKey string, err error, took time.Duration) {
	if m == nil {
		return
	}
	result := "confirmed"
	switch {
	case errors.Is(err, ErrUnconfirmed):
		result = "unconfirmed"
	case err != nil:
		result = "error"
	}
	m.publishes.WithLabelValues(exchange, routingKey, result).Inc()
	if err == nil {
		m.publishSeconds.WithLabelValues(exchange).Observe(took.Seconds())
	}
}
