package messaging

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/testsignal"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Defaults of SubscriberConfig.
const (
	PrefetchDefault        = 50
	ShutdownTimeoutDefault = 30 * time.Second
)

// resubscribeEvery is the pause before a subscription's channel consumes
// again after the broker cancelled its consumer (its queue was deleted) or
// the channel failed alone.
const resubscribeEvery = time.Second

// ErrSubscriberClosed is returned by Subscribe after Close.
var ErrSubscriberClosed = errors.New("messaging: subscriber closed")

// SubscriberConfig configures a Subscriber. Zero fields take the defaults.
type SubscriberConfig struct {
	URL string
	// URLs, when set, replaces URL: the brokers of a cluster, tried in
	// order; a lost connection is replaced by one to the next that answers.
	URLs     []string
	Name     string // connection name shown by the broker
	Prefetch int    // unacked deliveries per channel (Qos), default PrefetchDefault
	Channels int    // channels per topic, default 1
	// Topics overrides Channels and Prefetch for the topics it names.
	Topics map[string]TopicConfig
	// ShutdownTimeout bounds how long Close waits for the messages it
	// handed out to be acked or nacked; then their contexts are canceled,
	// and what is still unanswered goes back to its queue with the channel.
	ShutdownTimeout time.Duration
	// FinishHeld: when a subscription stops (Close, or its context ends),
	// its consumers are cancelled and what the broker had already sent is
	// still handed out until the library closes the delivery channel, rather
	// than given back to the queue, from which it would come again flagged
	// as redelivered (Delivery.Redelivered) though never handled. It needs a
	// reader until the message channel closes, as a Router is.
	FinishHeld bool
	// Initialize does SubscribeInitialize's work for a topic on a channel
	// of its own. By default it checks that the queue exists (a passive
	// declare): the contract's queues carry arguments only the topology
	// knows, and the api declares them.
	Initialize func(ch *amqp.Channel, topic string) error
}

// TopicConfig tunes the channels of one topic; zero fields take the
// Subscriber's.
type TopicConfig struct {
	Channels int
	Prefetch int
}

// Subscriber is a watermill message.Subscriber of RabbitMQ queues on
// amqp091-go: the topic is the queue's name. Each Subscribe consumes its
// queue on a few channels, each with its prefetch, and hands every
// delivery on as a *message.Message without waiting for its ack, so a
// Router handles up to prefetch × channels messages at once. The message's
// UUID is the delivery's id (Delivery.MessageID), its metadata the AMQP
// headers as text, its payload the body; its context carries the Delivery
// (DeliveryFrom) and the AMQP delivery (AMQPDeliveryFrom), and ends once the
// message is acked or nacked, or when a shutdown outlives ShutdownTimeout.
//
// Acks are coalesced per channel (acker): the run of answered deliveries
// goes as one multiple ack, a nack always requeues, and never is a delivery
// acked that its handler nacked. After a connection loss the subscriber
// reconnects at once and goes on feeding its subscriptions; messages handed
// out before are redelivered by the broker, and their late acks dropped.
type Subscriber struct {
	cfg   SubscriberConfig
	log   *slog.Logger
	stats AckStats

	mu      sync.Mutex
	conn    *amqp.Connection // nil while reconnecting
	raw     net.Conn
	up      chan struct{} // closed while conn is set
	keeping bool          // the keeper goroutine runs
	at      int           // index in cfg.URLs of the current or last connection

	closing    chan struct{} // closed by Close
	closeOnce  sync.Once
	shut       chan struct{} // closed when Close has finished
	hard       context.Context
	cancelHard context.CancelFunc
	lanes      sync.WaitGroup // every channel loop of every subscription
	kept       chan struct{}  // closed when the keeper goroutine ends

	consumeFailed testsignal.Signal[error] // a lane could not consume again: for tests, off otherwise
	reconnecting  testsignal.Signal[int]   // the keeper dials again (the attempt): for tests, off otherwise
}

// NewSubscriber returns a subscriber of cfg; it connects at its first
// Subscribe or SubscribeInitialize.
func NewSubscriber(cfg SubscriberConfig, log *slog.Logger) (*Subscriber, error) {
	cfg.Prefetch = cmp.Or(cfg.Prefetch, PrefetchDefault)
	cfg.Channels = cmp.Or(cfg.Channels, 1)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, ShutdownTimeoutDefault)
	cfg.Name = cmp.Or(cfg.Name, "isle-subscriber")
	cfg.URLs = addresses(cfg.URL, cfg.URLs)
	for _, u := range cfg.URLs {
		if _, err := amqp.ParseURI(u); err != nil {
			return nil, fmt.Errorf("messaging: subscriber: %w", err)
		}
	}
	s := &Subscriber{cfg: cfg, log: log, up: make(chan struct{}), closing: make(chan struct{}), shut: make(chan struct{}), kept: make(chan struct{})}
	s.hard, s.cancelHard = context.WithCancel(context.Background())
	return s, nil
}

// Stats are the frames the subscriber sent to ack or nack deliveries.
func (s *Subscriber) Stats() *AckStats { return &s.stats }

// SubscribeInitialize makes sure topic can be consumed (Initialize).
func (s *Subscriber) SubscribeInitialize(topic string) error {
	conn, err := s.connection(context.Background())
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("messaging: subscriber: open a channel: %w", err)
	}
	defer ch.Close()
	if s.cfg.Initialize != nil {
		err = s.cfg.Initialize(ch, topic)
	} else {
		_, err = ch.QueueDeclarePassive(topic, true, false, false, false, nil)
	}
	if err != nil {
		return fmt.Errorf("messaging: subscriber: queue %s: %w (run `islectl topology apply`)", topic, err)
	}
	return nil
}

// Subscribe consumes the queue named topic until ctx ends or the
// subscriber closes; then the returned channel is closed. The first
// channels open here, so a missing queue is an error now; later failures
// (a lost connection, a deleted queue) are recovered in the background.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-s.closing:
		return nil, ErrSubscriberClosed
	default:
	}
	conn, err := s.connection(ctx)
	if err != nil {
		return nil, err
	}
	tc := s.cfg.Topics[topic]
	sub := &subscription{s: s, topic: topic, out: make(chan *message.Message), stop: make(chan struct{}),
		prefetch: cmp.Or(tc.Prefetch, s.cfg.Prefetch)}
	n := cmp.Or(tc.Channels, s.cfg.Channels)
	lanes := make([]*lane, n)
	for i := range lanes {
		l := &lane{sub: sub, tag: topic + "#" + strconv.Itoa(i+1) + "." + strconv.FormatInt(laneSeq.Add(1), 10)}
		if l.ch, l.deliveries, err = sub.open(conn, l.tag); err != nil {
			for _, o := range lanes[:i] {
				_ = o.ch.Close()
			}
			return nil, err
		}
		l.conn = conn
		lanes[i] = l
	}
	s.lanes.Add(n)
	sub.forwarding.Add(n)
	for _, l := range lanes {
		go l.run()
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		close(sub.stop)
	}()
	go func() {
		sub.forwarding.Wait()
		close(sub.out)
	}()
	return sub.out, nil
}

// laneSeq numbers consumer tags, unique in the process.
var laneSeq atomic.Int64

// Close stops every subscription: no new delivery is taken, (FinishHeld)
// what the channels hold is handed out, the message channels close, and the
// messages handed out are waited for, up to ShutdownTimeout; then their
// contexts are canceled, and the connection is closed (what is unacked goes
// back to its queue). Close may be called many times and from many
// goroutines (a Router calls it once per handler); each call returns once
// the shutdown is done.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		go s.shutdown()
	})
	<-s.shut
	return nil
}

func (s *Subscriber) shutdown() {
	defer close(s.shut)
	timer := time.AfterFunc(s.cfg.ShutdownTimeout, func() {
		s.log.Warn("subscriber shutdown timeout passed; canceling the contexts of messages in flight, they go back to their queues")
		s.cancelHard()
	})
	s.lanes.Wait()
	timer.Stop()
	s.cancelHard()
	s.mu.Lock()
	keeping := s.keeping
	s.mu.Unlock()
	if keeping {
		<-s.kept // the keeper dials no more: s.conn is the last connection
	}
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn != nil {
		_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
	}
}

// subscription is one Subscribe: its topic's channels feed out.
type subscription struct {
	s          *Subscriber
	topic      string
	prefetch   int
	out        chan *message.Message
	stop       chan struct{} // closed when the subscription's context ends or the subscriber closes
	forwarding sync.WaitGroup
}

// open opens a channel on conn and consumes the topic's queue on it.
func (sub *subscription) open(conn *amqp.Connection, tag string) (*amqp.Channel, <-chan amqp.Delivery, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("messaging: subscribe %s: open a channel: %w", sub.topic, err)
	}
	if err := ch.Qos(sub.prefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, nil, fmt.Errorf("messaging: subscribe %s: prefetch: %w", sub.topic, err)
	}
	deliveries, err := ch.Consume(sub.topic, tag, false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, nil, fmt.Errorf("messaging: subscribe %s: %w (run `islectl topology apply`)", sub.topic, err)
	}
	return ch, deliveries, nil
}

// message builds the watermill message of a delivery from topic, and the
// cancel of its context (whose cause says why it ended: ErrChannelLost when
// its channel is gone).
func (s *Subscriber) message(d amqp.Delivery, topic string) (*message.Message, context.CancelCauseFunc) {
	in := &inflight{d: deliveryOf(d, topic), raw: d, hasRaw: true}
	msg := message.NewMessage(in.d.MessageID, d.Body)
	msg.Metadata = message.Metadata(in.d.Headers) // shared: neither side changes it
	ctx, cancel := context.WithCancelCause(s.hard)
	msg.SetContext(withDelivery(ctx, in))
	return msg, cancel
}

// AMQPDeliveryFrom returns the AMQP delivery a message's context (a
// Subscriber's) belongs to.
func AMQPDeliveryFrom(ctx context.Context) (*amqp.Delivery, bool) {
	if in := inflightOf(ctx); in != nil && in.hasRaw {
		return &in.raw, true
	}
	return nil, false
}
