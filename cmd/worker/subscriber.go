package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/messaging"
	amqp "github.com/rabbitmq/amqp091-go"
)

// WORKER_SUBSCRIBER=watermill-amqp: the worker's Router consumes through
// watermill-amqp/v3's subscriber instead of Isle's, with the same handlers
// and middleware, so that `islectl bench` measures the two side by side
// (doc/messaging.md, "watermill-amqp, measured"). It is not for production
// (the configuration refuses it without ISLE_BENCH=1): each of its channels
// holds one delivery until the handler acks it, and a redelivered message
// without an id comes with a new id and no redelivered flag, so it would be
// applied again.

// wamqpSubscriber is a message.Subscriber of the contract's queues (the
// topic is the queue's name) made of watermill-amqp subscribers on one
// connection: one per queue, since its Qos is a setting of the whole
// subscriber and each queue has its own prefetch, and each of a queue's
// channels is a Subscribe of its own, fanned into one message channel, so
// that a queue has as many channels as Isle's subscriber gives it.
type wamqpSubscriber struct {
	conn     *wamqp.ConnectionWrapper
	subs     map[string]*wamqp.Subscriber
	channels map[string]int
	closed   sync.Once
	err      error
}

// newWatermillAMQPSubscriber returns a watermill-amqp subscriber of topics
// with their channels and prefetch as messaging.Subscriber takes them
// (a zero field: prefetch, one channel). It checks that each queue exists
// and declares nothing: the contract's queues carry arguments the topology
// declared them with.
func newWatermillAMQPSubscriber(url string, prefetch int, topics map[string]messaging.TopicConfig, log *slog.Logger) (*wamqpSubscriber, error) {
	logger := messaging.WatermillLogger(log.With("component", "watermill-amqp"), map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug, // a line per channel opened and closed
	})
	conn, err := wamqp.NewConnection(wamqp.ConnectionConfig{AmqpURI: url}, logger)
	if err != nil {
		return nil, fmt.Errorf("watermill-amqp: %w", err)
	}
	s := &wamqpSubscriber{conn: conn, subs: map[string]*wamqp.Subscriber{}, channels: map[string]int{}}
	for topic, tc := range topics {
		sub, err := wamqp.NewSubscriberWithConnection(wamqpConfig(url, cmp.Or(tc.Prefetch, prefetch)), logger, conn)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("watermill-amqp: subscriber of %s: %w", topic, err)
		}
		s.subs[topic], s.channels[topic] = sub, cmp.Or(tc.Channels, 1)
	}
	return s, nil
}

// wamqpConfig consumes the queue named by the topic from the default
// exchange, with prefetch, and declares nothing. A nack requeues, as
// Isle's subscriber does (Isle nacks only what must stay in the queue).
func wamqpConfig(url string, prefetch int) wamqp.Config {
	return wamqp.Config{
		Connection:      wamqp.ConnectionConfig{AmqpURI: url},
		Marshaler:       deliveryMarshaler{},
		Exchange:        wamqp.ExchangeConfig{GenerateName: wamqp.GenerateExchangeNameConstant("")},
		Queue:           wamqp.QueueConfig{GenerateName: wamqp.GenerateQueueNameTopicName, Durable: true},
		QueueBind:       wamqp.QueueBindConfig{GenerateRoutingKey: func(string) string { return "" }},
		Consume:         wamqp.ConsumeConfig{Qos: wamqp.QosConfig{PrefetchCount: prefetch}},
		TopologyBuilder: passiveTopology{},
	}
}

// Subscribe consumes the topic's queue on its channels until ctx ends or
// the subscriber closes.
func (s *wamqpSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	sub, ok := s.subs[topic]
	if !ok {
		return nil, fmt.Errorf("watermill-amqp: no subscriber of %s", topic)
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan *message.Message)
	var fanIn sync.WaitGroup
	for range s.channels[topic] {
		in, err := sub.Subscribe(ctx, topic)
		if err != nil {
			cancel() // the channels opened so far stop
			return nil, fmt.Errorf("watermill-amqp: subscribe %s: %w (run `islectl topology apply`)", topic, err)
		}
		fanIn.Add(1)
		go func() {
			defer fanIn.Done()
			for msg := range in {
				out <- msg // a Router reads until out is closed
			}
		}()
	}
	go func() {
		fanIn.Wait()
		cancel()
		close(out)
	}()
	return out, nil
}

// Close stops every subscription (what is unacked is nacked back to its
// queue) and closes the connection. A Router calls it once per handler;
// each call returns once it is done.
func (s *wamqpSubscriber) Close() error {
	s.closed.Do(func() {
		for _, sub := range s.subs {
			_ = sub.Close()
		}
		s.err = s.conn.Close()
	})
	return s.err
}

// passiveTopology is a TopologyBuilder that declares nothing: it checks
// that the queue exists (a passive declare), as messaging.Subscriber does.
type passiveTopology struct{}

func (passiveTopology) BuildTopology(ch *amqp.Channel, p wamqp.BuildTopologyParams, _ wamqp.Config, _ watermill.LoggerAdapter) error {
	if _, err := ch.QueueDeclarePassive(p.QueueName, true, false, false, false, nil); err != nil {
		return fmt.Errorf("queue %s: %w", p.QueueName, err)
	}
	return nil
}

func (passiveTopology) ExchangeDeclare(*amqp.Channel, string, wamqp.Config) error {
	return fmt.Errorf("watermill-amqp: the worker declares no exchange")
}

// deliveryMarshaler reads a delivery into the message the middleware
// rebuilds a messaging.Delivery from (messaging.RouterHandler): the
// message_id as UUID (a watermill producer's uuid header, or a new uuid,
// when there is none), the body as payload, the headers as text metadata,
// and the correlation id under the metadata key messaging.Marshaler writes
// it to and the middleware reads it from. watermill-amqp's DefaultMarshaler
// takes the UUID from a header of its own and refuses a header that is not
// a string (the domains' retry counts are integers). Marshal is Isle's.
type deliveryMarshaler struct{ messaging.Marshaler }

func (deliveryMarshaler) Unmarshal(d amqp.Delivery) (*message.Message, error) {
	id := d.MessageId
	if id == "" {
		id, _ = d.Headers[wamqp.DefaultMessageUUIDHeaderKey].(string)
	}
	msg := message.NewMessage(cmp.Or(id, watermill.NewUUID()), d.Body)
	msg.Metadata = make(message.Metadata, len(d.Headers)+1)
	for k, v := range d.Headers {
		msg.Metadata[k] = messaging.HeaderText(v)
	}
	if d.CorrelationId != "" {
		msg.Metadata[messaging.MetadataCorrelationID] = d.CorrelationId
	}
	return msg, nil
}
