package messaging

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/tracing"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
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
	ex, msg, err := p.message(out)
	if err != nil {
		return err
	}
	return p.publish(ctx, ex, out.RoutingKey, msg)
}

// SendAll publishes every message of outs before it waits for any confirm,
// so that they are in flight together on the publisher's channels, and
// returns each one's outcome, in order, as Send would: nil once confirmed.
// All of them share one bound: the configured timeout (or ctx's deadline if
// sooner).
func (p *Publisher) SendAll(ctx context.Context, outs []Outgoing) []error {
	errs := make([]error, len(outs))
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	type flight struct { // a message handed to the link, awaiting its confirm
		at          int
		ctx         context.Context
		span        trace.Span
		ex, routing string
		msg         *message.Message
		req         *request
		began       time.Time
	}
	flights := make([]flight, 0, len(outs))
	for i, out := range outs {
		ex, msg, err := p.message(out)
		if err != nil {
			errs[i] = err
			continue
		}
		f := flight{at: i, msg: msg, routing: out.RoutingKey, ex: ex}
		f.ctx, f.span = startPublishSpan(ctx, ex, out.RoutingKey, msg)
		pub, err := p.marshal.Marshal(msg)
		if err == nil {
			f.began = time.Now()
			f.req, err = p.link.enqueue(f.ctx, ex, out.RoutingKey, pub)
		}
		if err != nil {
			errs[i] = p.published(f.ctx, f.span, ex, out.RoutingKey, msg, f.began, err)
			continue
		}
		flights = append(flights, f)
	}
	for _, f := range flights {
		errs[f.at] = p.published(f.ctx, f.span, f.ex, f.routing, f.msg, f.began, p.link.await(f.ctx, f.req))
	}
	return errs
}

// message is out as a watermill message, and the exchange of its routing
// key.
func (p *Publisher) message(out Outgoing) (string, *message.Message, error) {
	ex, ok := p.exchange[out.RoutingKey]
	if !ok {
		return "", nil, fmt.Errorf("messaging: publish: routing key %q is not in the topology", out.RoutingKey)
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
	return ex, msg, nil
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

func (p *Publisher) publish(ctx context.Context, exchange, routingKey string, msg *message.Message) error {
	ctx, span := startPublishSpan(ctx, exchange, routingKey, msg)
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pub, err := p.marshal.Marshal(msg)
	var began time.Time
	if err == nil {
		began = time.Now()
		err = p.link.publish(ctx, exchange, routingKey, pub)
	}
	return p.published(ctx, span, exchange, routingKey, msg, began, err)
}

// published records a publish's outcome err (began: when it was handed to
// the link; zero when it never was): the metrics, a log line and its span's
// end. It returns err as callers see it.
func (p *Publisher) published(ctx context.Context, span trace.Span, exchange, routingKey string, msg *message.Message, began time.Time, err error) error {
	if !began.IsZero() {
		p.metrics.published(exchange, routingKey, err, time.Since(began))
	}
	switch {
	case err == nil:
	case began.IsZero():
		err = fmt.Errorf("messaging: publish %s: %w", msg.UUID, err)
	default:
		p.log.WarnContext(ctx, "publish failed", "routing_key", routingKey, "message_id", msg.UUID, "err", err)
		err = fmt.Errorf("messaging: publish %s to %s: %w", msg.UUID, routingKey, err)
	}
	tracing.End(span, err)
	return err
}
