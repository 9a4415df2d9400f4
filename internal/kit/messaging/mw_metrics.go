package messaging

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// MetricsMiddleware counts each delivery of domain by its outcome
// (isle_messages_total) and observes its handler's time
// (isle_handler_duration_seconds). The outcome is the one the retry or
// dead-letter middleware inside reports (retried, dead, failed, requeued,
// stored, ok), with the time of the handler alone, the copy's publish left
// out. Without one inside, a message the router acks is ok and one it nacks
// (and so requeues) is requeued.
func MetricsMiddleware(domain string, m *Metrics) message.HandlerMiddleware {
	dm := m.forDomain(domain)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			slot := &inflightIn(msg).slot
			*slot = outcomeSlot{}
			began := time.Now()
			out, err := h(msg)
			if slot.outcome == "" {
				slot.outcome, slot.took = OutcomeOK, time.Since(began)
				if err != nil {
					slot.outcome = OutcomeRequeued
				}
			}
			dm.handled(slot.outcome, slot.took)
			return out, err
		}
	}
}

// outcomeSlot is where the middleware that decides a delivery's outcome
// leaves it for MetricsMiddleware around it (inflight.slot).
type outcomeSlot struct {
	outcome string
	took    time.Duration // the handler's time
}

// report leaves a delivery's outcome, and its handler's time, in the slot
// ctx carries, if any.
func report(ctx context.Context, outcome string, took time.Duration) {
	if in := inflightOf(ctx); in != nil {
		in.slot = outcomeSlot{outcome: outcome, took: took}
	}
}
