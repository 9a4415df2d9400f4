package messaging

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeliveryOf is a delivery of queue as the subscriber hands it to the
// router's middleware: the retry header not parsed, no IsleID given.
func DeliveryOf(d amqp.Delivery, queue string) Delivery { return deliveryOf(d, queue) }

// ContextWith is ctx carrying d and nothing else: a subscriber's context
// before CorrelationMiddleware put the trace id in.
func ContextWith(ctx context.Context, d Delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

// Draining is closed once Close has begun: the subscriber takes no new
// delivery from the broker.
func (s *Subscriber) Draining() <-chan struct{} { return s.closing }
