package messaging

import (
	"context"

	"github.com/eisland/isle/internal/testsignal"
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

// ReconnectFailed is signalled with the error of each reconnect attempt
// of p's that fails, once a test turns it on.
func (p *Publisher) ReconnectFailed() *testsignal.Signal[error] { return &p.link.reconnectFailed }

// ConsumeFailed is signalled with the error of each attempt of s's lanes
// to consume again that fails (the queue is missing), once a test turns
// it on.
func (s *Subscriber) ConsumeFailed() *testsignal.Signal[error] { return &s.consumeFailed }
