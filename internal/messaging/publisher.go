package messaging

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Publisher defaults.
const (
	PublishTimeoutDefault  = 5 * time.Second
	PublishChannelsDefault = 32
)

// ErrUnconfirmed is returned when the broker did not confirm a publish within
// the timeout (a blocked or stuck broker). The message may still arrive: a
// caller that retries can cause a duplicate, never a loss.
var ErrUnconfirmed = errors.New("messaging: publish not confirmed in time")

// PublisherConfig configures a Publisher. Zero fields take the defaults.
type PublisherConfig struct {
	URL      string
	Name     string        // connection name shown by the broker
	Timeout  time.Duration // bound on one publish, confirm included
	Channels int           // pooled confirm channels; concurrent callers beyond it wait
}

// Publisher sends messages with publisher confirms. It is safe for
// concurrent use; each Send waits for its own confirm, and callers run in
// parallel on a pool of channels.
type Publisher struct {
	url      string
	wm       *wamqp.Publisher
	tp       *topology.Topology
	exchange map[string]string // routing key -> exchange
	timeout  time.Duration
	slots    chan struct{}
	metrics  *Metrics
	log      *slog.Logger
}

// NewPublisher connects, declares the topology (a message published before
// its queue exists would be dropped, even with confirms) and opens the pool.
func NewPublisher(cfg PublisherConfig, tp *topology.Topology, m *Metrics, log *slog.Logger) (*Publisher, error) {
	p := &Publisher{
		url:      cfg.URL,
		tp:       tp,
		exchange: make(map[string]string),
		timeout:  cmp.Or(cfg.Timeout, PublishTimeoutDefault),
		metrics:  m,
		log:      log,
	}
	for _, q := range tp.Queues() {
		p.exchange[q.RoutingKey] = q.Exchange
	}
	channels := cmp.Or(cfg.Channels, PublishChannelsDefault)
	p.slots = make(chan struct{}, 2*channels)
	wcfg := wamqp.Config{
		Connection: connectionConfig(cfg.URL, cmp.Or(cfg.Name, "isle-publisher")),
		Marshaler:  Marshaler{IntHeaders: retryHeaders(tp)},
		Exchange: wamqp.ExchangeConfig{
			GenerateName: func(routingKey string) string { return p.exchange[routingKey] },
			Type:         topology.ExchangeKind,
			Durable:      true,
		},
		Publish: wamqp.PublishConfig{
			GenerateRoutingKey: func(routingKey string) string { return routingKey },
			ConfirmDelivery:    true,
			ChannelPoolSize:    channels,
		},
		TopologyBuilder: &wamqp.DefaultTopologyBuilder{},
	}
	wm, err := wamqp.NewPublisher(wcfg, watermill.NewSlogLogger(log))
	if err != nil {
		return nil, fmt.Errorf("messaging: publisher: %w", err)
	}
	if err := tp.Declare(wm.Connection()); err != nil {
		_ = wm.Close()
		return nil, fmt.Errorf("messaging: publisher: %w", err)
	}
	p.wm = wm
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

// Close closes the channels and the connection.
func (p *Publisher) Close() error { return p.wm.Close() }

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

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	msg.SetContext(ctx)
	began := time.Now()
	err := p.send(ctx, out.RoutingKey, msg)
	p.metrics.published(ex, out.RoutingKey, err, time.Since(began))
	if err != nil {
		return fmt.Errorf("messaging: publish %s to %s: %w", msg.UUID, out.RoutingKey, err)
	}
	return nil
}

// send runs the blocking watermill publish in a goroutine so that a stuck
// broker cannot hold the caller past its deadline. The slots bound how many
// such goroutines can pile up behind a wedged connection.
func (p *Publisher) send(ctx context.Context, routingKey string, msg *message.Message) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: every channel busy (%v)", ErrUnconfirmed, ctx.Err())
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-p.slots }()
		done <- p.wm.Publish(routingKey, msg)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		p.log.Warn("publish not confirmed in time", "routing_key", routingKey, "message_id", msg.UUID, "timeout", p.timeout)
		return fmt.Errorf("%w (%v)", ErrUnconfirmed, ctx.Err())
	}
}

// Ping checks that the broker answers, on a short-lived connection of its
// own: watermill-amqp's connection wrapper swaps its state without a lock
// while it reconnects, so it is not read from other goroutines here.
func (p *Publisher) Ping(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(p.timeout)
	}
	done := make(chan error, 1)
	go func() {
		conn, err := amqp.DialConfig(p.url, amqp.Config{
			Dial:       amqp.DefaultDial(time.Until(dl)),
			Properties: amqp.Table{"connection_name": "isle-ping"},
		})
		if err == nil {
			err = conn.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("messaging: RabbitMQ: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("messaging: RabbitMQ did not answer: %w", ctx.Err())
	}
}
