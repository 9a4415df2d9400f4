package messaging

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/tracing"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
)

// Publisher defaults.
const (
	PublishTimeoutDefault  = 5 * time.Second
	PublishChannelsDefault = 4
)

// PublisherConfig configures a Publisher. Zero fields take the defaults.
type PublisherConfig struct {
	URL string
	// URLs, when set, replaces URL: the brokers of a cluster, tried in
	// order; a lost connection is replaced by one to the next that answers.
	URLs     []string
	Name     string        // connection name shown by the broker
	Timeout  time.Duration // bound on one publish, waiting for a connection and the confirm included
	Channels int           // confirm channels; each carries many publishes in flight
	// EnsureOnly: on each connection only make sure the topology exists
	// (Topology.Ensure: passive checks, declaring what is missing) instead
	// of declaring it, for a binary whose RabbitMQ user may not declare.
	EnsureOnly bool
}

// Publisher sends messages with publisher confirms on a connection of its
// own. It is safe for concurrent use: each Send waits for its own confirm,
// while its channels carry many publishes in flight (pipelined confirms).
//
// After a connection loss it reconnects by itself in the background, with
// backoff, and declares the topology again (or, EnsureOnly, makes sure it
// exists) before it publishes; publishes in
// flight fail with ErrUnconfirmed (they may or may not have arrived), and new
// ones wait for the reconnect up to their deadline. Ping reports whether it
// can publish now. Its Watermill method gives it to watermill components.
type Publisher struct {
	link     *link
	tp       *topology.Topology
	exchange map[string]string // routing key -> exchange
	marshal  Marshaler
	timeout  time.Duration
	metrics  *Metrics
	log      *slog.Logger
}

// NewPublisher connects and declares the topology (a message published
// before its queue exists would be dropped, even with confirms); either
// failing is an error. Later losses are recovered in the background.
func NewPublisher(cfg PublisherConfig, tp *topology.Topology, m *Metrics, log *slog.Logger) (*Publisher, error) {
	p := &Publisher{
		tp:       tp,
		exchange: make(map[string]string),
		marshal:  Marshaler{IntHeaders: retryHeaders(tp)},
		timeout:  cmp.Or(cfg.Timeout, PublishTimeoutDefault),
		metrics:  m,
		log:      log,
	}
	for _, q := range tp.Queues() {
		p.exchange[q.RoutingKey] = q.Exchange
	}
	declare := tp.Declare
	if cfg.EnsureOnly {
		declare = tp.Ensure
	}
	l, err := dialLink(&link{
		urls:     addresses(cfg.URL, cfg.URLs),
		name:     cmp.Or(cfg.Name, "isle-publisher"),
		channels: max(1, cmp.Or(cfg.Channels, PublishChannelsDefault)),
		declare:  declare,
		log:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("messaging: publisher: %w", err)
	}
	p.link = l
	return p, nil
}

func retryHeaders(tp *topology.Topology) map[string]bool {
	out := map[string]bool{HeaderReplay: true}
	for _, d := range tp.Domains() {
		if d.RetryHeader != "" {
			out[d.RetryHeader] = true
		}
	}
	return out
}

// Close closes the connection and stops reconnecting. Publishes in flight
// fail with ErrUnconfirmed, later ones with ErrPublisherClosed. It is
// idempotent and safe at any time, also while the broker is unreachable.
func (p *Publisher) Close() error {
	p.link.close()
	return nil
}

// Ping reports whether the publisher can publish now: its own connection is
// up, a channel is open, and the broker does not block it. It asks the
// broker nothing and returns at once.
func (p *Publisher) Ping(context.Context) error { return p.link.ready() }

// Outgoing is one message to publish.
type Outgoing struct {
	RoutingKey string            // must be one of the topology's; the exchange follows from it
	Body       []byte            // JSON
	MessageID  string            // "" = a new UUID; keep it across retries of one message
	TypeID     string            // __TypeId__
	TraceID    string            // correlation id, sent as x-trace-id and correlation_id
	Priority   uint8             // 0–10 (topology.MaxPriority) for the replication queue; sent as it is
	Headers    map[string]string // further headers; retry counts are sent as int32
}

// Send publishes out and waits for the broker's confirm, at most the
// configured timeout (or ctx's deadline if sooner).
func (p *Publisher) Send(ctx context.Context, out Outgoing) error {
	ex, ok := p.exchange[out.RoutingKey]
	if !ok {
		return fmt.Errorf("messaging: publish: routing key %q is not in the topology", out.RoutingKey)
	}
	msg := message.NewMessage(cmp.Or(out.MessageID, uuid.NewString()), out.Body)
	for k, v := range out.Headers {
		msg.Metadata.Set(k, v)
	}
	if out.TypeID != "" {
		msg.Metadata.Set(HeaderTypeID, out.TypeID)
	}
	if out.TraceID != "" {
		msg.Metadata.Set(HeaderTraceID, out.TraceID)
		msg.Metadata.Set(metaCorrelation, out.TraceID)
	}
	if out.Priority > 0 {
		msg.Metadata.Set(metaPriority, strconv.Itoa(int(out.Priority)))
	}

	return p.publish(ctx, ex, out.RoutingKey, msg)
}

// Watermill returns p as a watermill message.Publisher, for watermill
// components (a router's handlers, a forwarder): the topic is the routing
// key, and the messages of one call are sent one after the other, in order,
// each bounded like a Send (the timeout, or its context's deadline if
// sooner). Metadata become headers as the Marshaler says. Its Close closes p.
func (p *Publisher) Watermill() message.Publisher { return watermillPublisher{p} }

type watermillPublisher struct{ p *Publisher }

func (w watermillPublisher) Publish(topic string, msgs ...*message.Message) error {
	ex, ok := w.p.exchange[topic]
	if !ok {
		return fmt.Errorf("messaging: publish: routing key %q is not in the topology", topic)
	}
	for _, msg := range msgs {
		if err := w.p.publish(msg.Context(), ex, topic, msg); err != nil {
			return err
		}
	}
	return nil
}

func (w watermillPublisher) Close() error { return w.p.Close() }

func (p *Publisher) publish(ctx context.Context, exchange, routingKey string, msg *message.Message) (err error) {
	ctx, span := startPublishSpan(ctx, exchange, routingKey, msg)
	defer func() { tracing.End(span, err) }()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pub, err := p.marshal.Marshal(msg)
	if err != nil {
		return fmt.Errorf("messaging: publish %s: %w", msg.UUID, err)
	}
	began := time.Now()
	err = p.link.publish(ctx, exchange, routingKey, pub)
	p.metrics.published(exchange, routingKey, err, time.Since(began))
	if err != nil {
		p.log.WarnContext(ctx, "publish failed", "routing_key", routingKey, "message_id", msg.UUID, "err", err)
		return fmt.Errorf("messaging: publish %s to %s: %w", msg.UUID, routingKey, err)
	}
	return nil
}
