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
	amqp "github.com/rabbitmq/amqp091-go"
)

// Consumer defaults.
const (
	PrefetchDefault        = 50
	ShutdownTimeoutDefault = 30 * time.Second
)

// ConsumerConfig configures a Consumer. Zero fields take the defaults.
type ConsumerConfig struct {
	URL             string
	Name            string        // connection name shown by the broker
	Prefetch        int           // unacked deliveries per handler's channel
	ShutdownTimeout time.Duration // how long handlers in flight may run on after Run's ctx ends
}

// Route is one queue and what handles it. Concurrency handlers consume the
// queue in parallel, each on its own channel (watermill-amqp hands a channel
// one delivery at a time, so prefetch alone adds no parallelism).
type Route struct {
	Name        string // unique, e.g. "email" or "email-dlq"
	Queue       string
	Concurrency int // default 1
	Handle      RouteFunc
}

// Consumer runs routes with a watermill router on one AMQP connection.
type Consumer struct {
	cfg     ConsumerConfig
	log     *slog.Logger
	sub     *wamqp.Subscriber
	router  *message.Router
	hard    context.Context // canceled when the shutdown timeout passes
	cancel  context.CancelFunc
	running bool
}

// NewConsumer connects. Queues must exist (the binary declares the topology
// first); a missing queue fails its route at start.
func NewConsumer(cfg ConsumerConfig, log *slog.Logger) (*Consumer, error) {
	cfg.Prefetch = cmp.Or(cfg.Prefetch, PrefetchDefault)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, ShutdownTimeoutDefault)
	wlog := watermill.NewSlogLogger(log)
	sub, err := wamqp.NewSubscriber(wamqp.Config{
		Connection: connectionConfig(cfg.URL, cmp.Or(cfg.Name, "isle-consumer")),
		Marshaler:  Marshaler{},
		// The queue is the topic; nothing is declared or bound here.
		Exchange:  wamqp.ExchangeConfig{GenerateName: func(string) string { return "" }},
		Queue:     wamqp.QueueConfig{GenerateName: func(queue string) string { return queue }, Durable: true},
		QueueBind: wamqp.QueueBindConfig{GenerateRoutingKey: func(string) string { return "" }},
		Consume: wamqp.ConsumeConfig{
			Qos: wamqp.QosConfig{PrefetchCount: cfg.Prefetch},
			// Handler failures never nack (Flow acks after copying them); a
			// nack only happens when a copy could not be published or a
			// shutdown ran out of time, and then the message must stay.
			NoRequeueOnNack: false,
		},
		TopologyBuilder: existingQueue{},
	}, wlog)
	if err != nil {
		return nil, fmt.Errorf("messaging: consumer: %w", err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.ShutdownTimeout}, wlog)
	if err != nil {
		_ = sub.Close()
		return nil, err
	}
	c := &Consumer{cfg: cfg, log: log, sub: sub, router: router}
	c.hard, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Add registers a route; call it before Run.
func (c *Consumer) Add(r Route) {
	for i := range max(1, r.Concurrency) {
		name := r.Name + "#" + strconv.Itoa(i+1)
		c.router.AddConsumerHandler(name, r.Queue, c.sub, func(msg *message.Message) error {
			// The delivery's own context is canceled as soon as shutdown
			// starts; handlers keep running until they finish or the
			// shutdown timeout passes.
			ctx, stop := context.WithCancel(context.WithoutCancel(msg.Context()))
			defer stop()
			defer context.AfterFunc(c.hard, stop)()
			return r.Handle(ctx, msg)
		})
	}
}

// Run consumes until ctx ends, then drains: no new delivery is taken,
// deliveries in flight finish and are acked, and prefetched ones go back to
// their queues. If handlers outlive the shutdown timeout, their contexts are
// canceled and their deliveries requeued; nothing is lost either way.
func (c *Consumer) Run(ctx context.Context) error {
	if c.running {
		return errors.New("messaging: consumer already running")
	}
	c.running = true
	defer c.sub.Close()
	consume, stopConsuming := context.WithCancel(context.Background())
	defer stopConsuming()
	done := make(chan error, 1)
	go func() { done <- c.router.Run(consume) }()
	select {
	case <-c.router.Running():
	case err := <-done:
		return fmt.Errorf("messaging: consumer: %w", err)
	}
	select {
	case err := <-done:
		return fmt.Errorf("messaging: consumer stopped: %v", err)
	case <-ctx.Done():
	}
	c.log.Info("draining: no new deliveries; waiting for handlers in flight", "timeout", c.cfg.ShutdownTimeout)
	began := time.Now()
	stopConsuming()
	select {
	case <-done:
		c.log.Info("drained", "took", time.Since(began).Round(time.Millisecond))
		return nil
	case <-time.After(c.cfg.ShutdownTimeout):
	}
	c.log.Warn("shutdown timeout passed; canceling handlers, their deliveries go back to the queue")
	c.cancel()
	err := c.router.Close()
	<-done
	return err
}

// Running is closed once every route consumes.
func (c *Consumer) Running() <-chan struct{} { return c.router.Running() }

// connectionConfig is a consumer's connection: a heartbeat to notice a dead
// broker, the name the broker shows, and watermill-amqp's reconnects. (The
// Publisher keeps a connection of its own, see link.)
func connectionConfig(url, name string) wamqp.ConnectionConfig {
	return wamqp.ConnectionConfig{
		AmqpURI: url,
		AmqpConfig: &amqp.Config{
			Heartbeat:  10 * time.Second,
			Properties: amqp.Table{"connection_name": name},
		},
		Reconnect: wamqp.DefaultReconnectConfig(),
	}
}

// existingQueue checks that the queue exists instead of declaring it: the
// topology (with arguments the subscriber does not know) is declared by the
// binary before it consumes.
type existingQueue struct{}

func (existingQueue) BuildTopology(ch *amqp.Channel, p wamqp.BuildTopologyParams, _ wamqp.Config, _ watermill.LoggerAdapter) error {
	if _, err := ch.QueueDeclarePassive(p.QueueName, true, false, false, false, nil); err != nil {
		return fmt.Errorf("queue %s: %w (run `islectl topology apply`)", p.QueueName, err)
	}
	return nil
}

func (existingQueue) ExchangeDeclare(*amqp.Channel, string, wamqp.Config) error { return nil }
