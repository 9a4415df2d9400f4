package messaging

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"

	"github.com/eisland/isle/internal/kit/testsignal"
	amqp "github.com/rabbitmq/amqp091-go"
)

// DeliveryOf is a delivery of queue as the subscriber hands it to the
// router's middleware: the retry header not parsed, no IsleID given.
func DeliveryOf(d amqp.Delivery, queue string) Delivery { return deliveryOf(d, queue) }

// ContextWith is ctx carrying d and nothing else: a subscriber's context
// before CorrelationMiddleware put the trace id in.
func ContextWith(ctx context.Context, d Delivery) context.Context {
	return withInflight(ctx, &inflight{d: d})
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

// RetryMiddlewareSignalled is RetryMiddleware with the signal its
// redeliveries send, with their body's hash, when they wait for earlier
// deliveries of their body.
func RetryMiddlewareSignalled(dom topology.Domain, pub *Publisher, cfg ChainConfig, log *slog.Logger) (message.HandlerMiddleware, *testsignal.Signal[string]) {
	r := newRetrier(dom, pub, cfg, log)
	return counted(dom.Name, nil, r.decide), &r.bodies.met
}

// Reconnecting is signalled with the attempt number before each dial of
// s's reconnect loop, once a test turns it on.
func (s *Subscriber) Reconnecting() *testsignal.Signal[int] { return &s.reconnecting }
