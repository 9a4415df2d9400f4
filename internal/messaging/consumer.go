package messaging

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Consumer defaults.
const (
	PrefetchDefault        = 50
	ShutdownTimeoutDefault = 30 * time.Second
)

// resubscribeEvery is the pause before a route consumes again after the
// broker cancelled it (its queue was deleted) or a channel failed.
const resubscribeEvery = time.Second

// ConsumerConfig configures a Consumer. Zero fields take the defaults.
type ConsumerConfig struct {
	URL             string
	Name            string        // connection name shown by the broker
	Prefetch        int           // unacked deliveries per channel (a route's own Prefetch or Batch may ask more)
	ShutdownTimeout time.Duration // how long handlers in flight may run on after Run's ctx ends
}

// RouteFunc handles deliveries of a route, as many as the route's Batch
// at most, and says of each whether it is done (nil: it is acked) or must go
// back to its queue (an error: it is requeued). A failure the route dealt
// with itself, by sending a copy to a retry queue, is done.
type RouteFunc func(ctx context.Context, ds []Delivery) []error

// Route is one queue and what handles it. Concurrency channels consume the
// queue, each handing its deliveries to Handle one batch at a time: up to
// Batch deliveries already at hand (1 by default, so a lone delivery never
// waits for company). A batch done whole is acked with one multiple ack.
type Route struct {
	Name        string // unique, e.g. "email" or "email-dlq"
	Queue       string
	Concurrency int // default 1
	Batch       int // default 1
	Prefetch    int // default the consumer's, and at least twice Batch
	Handle      RouteFunc
	// FinishHeld: on a drain, the route's channels stop the broker's
	// deliveries and handle the ones they hold, rather than give them back
	// to the queue, from which they would come back flagged as redelivered
	// (Delivery.Redelivered) though never handled.
	FinishHeld bool
}

func (r Route) prefetch(def int) int {
	return max(cmp.Or(r.Prefetch, def), 2*r.batch())
}

func (r Route) batch() int { return max(1, r.Batch) }

// Consumer runs routes on one AMQP connection of its own. After a
// connection loss it reconnects in the background, with backoff, and every
// route consumes again; deliveries in flight then are redelivered, as the
// broker requeues what a lost channel held unacked.
type Consumer struct {
	cfg     ConsumerConfig
	log     *slog.Logger
	routes  []Route
	running chan struct{}
	drains  chan struct{} // closed when a drain stops taking deliveries
	once    sync.Once
	hard    context.Context // canceled when the shutdown timeout passes
	cancel  context.CancelFunc
	started bool
}

// NewConsumer returns a consumer of cfg. It connects when it runs.
func NewConsumer(cfg ConsumerConfig, log *slog.Logger) (*Consumer, error) {
	cfg.Prefetch = cmp.Or(cfg.Prefetch, PrefetchDefault)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, ShutdownTimeoutDefault)
	cfg.Name = cmp.Or(cfg.Name, "isle-consumer")
	if _, err := amqp.ParseURI(cfg.URL); err != nil {
		return nil, fmt.Errorf("messaging: consumer: %w", err)
	}
	c := &Consumer{cfg: cfg, log: log, running: make(chan struct{}), drains: make(chan struct{})}
	c.hard, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Add registers a route; call it before Run.
func (c *Consumer) Add(r Route) { c.routes = append(c.routes, r) }

// Running is closed once every route consumes.
func (c *Consumer) Running() <-chan struct{} { return c.running }

// Draining is closed once Run's drain has stopped taking new deliveries.
func (c *Consumer) Draining() <-chan struct{} { return c.drains }

// Run consumes until ctx ends, then drains: no new delivery is taken,
// deliveries in flight finish and are acked, and prefetched ones go back to
// their queues (a FinishHeld route handles them first). If handlers outlive the shutdown timeout, their contexts are
// canceled and their deliveries requeued; nothing is lost either way. The
// first connection must succeed and every route's queue exist (the binary
// declares the topology first); later losses are recovered.
func (c *Consumer) Run(ctx context.Context) error {
	if c.started {
		return errors.New("messaging: consumer already running")
	}
	c.started = true
	defer c.cancel()
	if len(c.routes) == 0 {
		return errors.New("messaging: consumer has no route")
	}
	s, err := c.connect(ctx)
	if err != nil {
		return fmt.Errorf("messaging: consumer: %w", err)
	}
	for {
		c.once.Do(func() { close(c.running) })
		if lost := s.hold(ctx); lost == nil {
			return c.drain(s)
		} else {
			c.log.Warn("RabbitMQ consumer connection lost; reconnecting", "err", lost)
		}
		s.wait()
		began := time.Now()
		for attempt := 1; ; attempt++ {
			if !sleep(ctx, backoff(attempt)) {
				return nil
			}
			if s, err = c.connect(ctx); err == nil {
				c.log.Info("RabbitMQ consumer reconnected", "down_for", time.Since(began).Round(time.Millisecond), "attempts", attempt)
				break
			}
			c.log.Warn("RabbitMQ consumer could not reconnect", "attempt", attempt, "err", err)
		}
	}
}

// consumerSession is one connection of a Consumer and the channels of its routes.
type consumerSession struct {
	c     *Consumer
	conn  *amqp.Connection
	raw   net.Conn
	lost  chan *amqp.Error
	stop  chan struct{} // closed at shutdown: no new delivery is taken
	gone  chan struct{} // closed when the connection is lost
	loops sync.WaitGroup
}

// connect dials and starts every route's channels. A route whose queue is
// missing fails it: at start that is a wiring error to report, and after a
// reconnect the loop tries again.
func (c *Consumer) connect(ctx context.Context) (*consumerSession, error) {
	var raw net.Conn
	conn, err := amqp.DialConfig(c.cfg.URL, amqp.Config{
		Heartbeat:  heartbeat,
		Properties: amqp.Table{"connection_name": c.cfg.Name},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := nc.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
				_ = nc.Close()
				return nil, err
			}
			raw = nc
			return coalesce(nc), nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	s := &consumerSession{c: c, conn: conn, raw: raw, stop: make(chan struct{}), gone: make(chan struct{})}
	s.lost = conn.NotifyClose(make(chan *amqp.Error, 1))
	type sub struct {
		r          Route
		ch         *amqp.Channel
		deliveries <-chan amqp.Delivery
		tag        string
	}
	var subs []sub
	for _, r := range c.routes {
		for i := range max(1, r.Concurrency) {
			tag := r.Name + "#" + strconv.Itoa(i+1)
			ch, deliveries, err := c.subscribe(conn, r, tag)
			if err != nil {
				_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
				return nil, err
			}
			subs = append(subs, sub{r, ch, deliveries, tag})
		}
	}
	for _, sb := range subs {
		s.loops.Go(func() { s.consume(sb.r, sb.tag, sb.ch, sb.deliveries) })
	}
	return s, nil
}

// subscribe opens a channel and consumes r's queue on it.
func (c *Consumer) subscribe(conn *amqp.Connection, r Route, tag string) (*amqp.Channel, <-chan amqp.Delivery, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("route %s: open a channel: %w", r.Name, err)
	}
	if err := ch.Qos(r.prefetch(c.cfg.Prefetch), 0, false); err != nil {
		_ = ch.Close()
		return nil, nil, fmt.Errorf("route %s: prefetch: %w", r.Name, err)
	}
	deliveries, err := ch.Consume(r.Queue, tag, false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, nil, fmt.Errorf("route %s: queue %s: %w (run `islectl topology apply`)", r.Name, r.Queue, err)
	}
	return ch, deliveries, nil
}

// hold returns nil when ctx ends, or the error that lost the connection.
func (s *consumerSession) hold(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err, ok := <-s.lost:
		close(s.gone)
		_ = s.raw.Close() // a loop may be stuck writing to a peer that stopped reading
		if !ok || err == nil {
			return errors.New("connection closed")
		}
		return err
	}
}

// wait waits for the consumerSession's loops after its connection was lost.
func (s *consumerSession) wait() { s.loops.Wait() }

// drain stops taking deliveries, lets the batches in flight finish (their
// handlers' contexts are canceled after the shutdown timeout), and closes
// the connection: what the channels held unacked goes back to the queues.
func (c *Consumer) drain(s *consumerSession) error {
	c.log.Info("draining: no new deliveries; waiting for handlers in flight", "timeout", c.cfg.ShutdownTimeout)
	began := time.Now()
	close(s.stop)
	close(c.drains)
	done := make(chan struct{})
	go func() {
		s.loops.Wait()
		close(done)
	}()
	select {
	case <-done:
		c.log.Info("drained", "took", time.Since(began).Round(time.Millisecond))
	case <-time.After(c.cfg.ShutdownTimeout):
		c.log.Warn("shutdown timeout passed; canceling handlers, their deliveries go back to the queue")
		c.cancel()
		select {
		case <-done:
		case <-time.After(closeTimeout):
			c.log.Error("handlers ignore their canceled contexts; closing the connection under them")
		}
	}
	_ = s.conn.CloseDeadline(time.Now().Add(closeTimeout))
	<-done
	return nil
}

// consume runs one channel of route r until the connection is lost or the
// consumer drains. When the broker cancels the consumer (its queue was
// deleted) or the channel fails alone, it consumes again once it can.
func (s *consumerSession) consume(r Route, tag string, ch *amqp.Channel, deliveries <-chan amqp.Delivery) {
	for {
		if stopped := s.serve(r, tag, ch, deliveries); stopped {
			_ = ch.Close() // prefetched deliveries go back to the queue
			return
		}
		_ = ch.Close()
		if s.conn.IsClosed() {
			return
		}
		s.c.log.Warn("consumer cancelled by the broker or its channel closed; consuming again", "route", r.Name, "queue", r.Queue)
		for {
			select {
			case <-s.stop:
				return
			case <-s.gone:
				return
			case <-time.After(resubscribeEvery):
			}
			var err error
			if ch, deliveries, err = s.c.subscribe(s.conn, r, tag); err == nil {
				s.c.log.Info("consuming again", "route", r.Name, "queue", r.Queue)
				break
			}
			if s.conn.IsClosed() {
				return
			}
			s.c.log.Warn("cannot consume yet", "route", r.Name, "err", err)
		}
	}
}

// serve hands r's deliveries to its handler a batch at a time, and acks or
// requeues each as the handler says. It returns true when the consumer
// drains, false when the deliveries end (channel closed or consumer
// cancelled).
func (s *consumerSession) serve(r Route, tag string, ch *amqp.Channel, deliveries <-chan amqp.Delivery) bool {
	size := r.batch()
	batch := make([]amqp.Delivery, 0, size)
	for {
		select {
		case <-s.stop: // before a delivery that is ready too: a drain takes no more
			return s.finish(r, tag, ch, deliveries)
		default:
		}
		select {
		case <-s.stop:
			return s.finish(r, tag, ch, deliveries)
		case d, ok := <-deliveries:
			if !ok {
				return false
			}
			batch = append(batch[:0], d)
		}
		s.fill(deliveries, &batch, size)
		s.handle(r, ch, batch)
	}
}

// finish ends a channel's part in a drain. A route that finishes what it
// holds (FinishHeld) cancels its consumer, so the broker sends no more, and
// handles the deliveries the channel holds until the library closes them
// (after the broker's cancel-ok and the last one it buffered). Any other
// leaves them to go back to the queue when the channel closes.
func (s *consumerSession) finish(r Route, tag string, ch *amqp.Channel, deliveries <-chan amqp.Delivery) bool {
	if !r.FinishHeld {
		return true
	}
	if err := ch.Cancel(tag, false); err != nil {
		return true // the channel is gone, and with it what it held
	}
	batch := make([]amqp.Delivery, 0, r.batch())
	for d := range deliveries {
		batch = append(batch[:0], d)
		s.fill(deliveries, &batch, r.batch())
		s.handle(r, ch, batch)
	}
	return true
}

// fill adds to batch the deliveries already at hand, up to size, without
// waiting for more: a lone delivery is handled at once. The library hands
// deliveries over one at a time from a goroutine of its own (an unbuffered
// channel), so "at hand" means also those it holds: when none is ready, the
// scheduler is given a turn or two to let that goroutine offer the next.
func (s *consumerSession) fill(deliveries <-chan amqp.Delivery, batch *[]amqp.Delivery, size int) {
	for yields := 0; len(*batch) < size; {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			*batch = append(*batch, d)
			yields = 0
		default:
			if yields == fillYields {
				return
			}
			runtime.Gosched()
			yields++
		}
	}
}

// fillYields is how many turns fill gives the library's goroutine before
// it takes a batch as complete.
const fillYields = 2

// handle runs r's handler on batch and settles each delivery with the
// broker: one multiple ack when every one is done.
func (s *consumerSession) handle(r Route, ch *amqp.Channel, batch []amqp.Delivery) {
	ds := make([]Delivery, len(batch))
	for i, d := range batch {
		ds[i] = deliveryOf(d, r.Queue)
	}
	// Shutdown does not cancel a batch in flight; the shutdown timeout does.
	ctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(s.c.hard, cancel)
	errs := r.Handle(ctx, ds)
	stop()
	cancel()
	if len(errs) != len(batch) {
		s.c.log.Error("route answered for the wrong number of deliveries; requeueing them", "route", r.Name, "deliveries", len(batch), "answers", len(errs))
		errs = make([]error, len(batch))
		for i := range errs {
			errs[i] = errors.New("no answer")
		}
	}
	last, whole := len(batch)-1, true
	for _, err := range errs {
		whole = whole && err == nil
	}
	var err error
	if whole {
		err = ch.Ack(batch[last].DeliveryTag, true)
	} else {
		for i, d := range batch {
			if errs[i] == nil {
				err = errors.Join(err, ch.Ack(d.DeliveryTag, false))
			} else {
				err = errors.Join(err, ch.Nack(d.DeliveryTag, false, true))
			}
		}
	}
	if err != nil && !ch.IsClosed() {
		s.c.log.Warn("could not settle deliveries with the broker; they will be redelivered", "route", r.Name, "err", err)
	}
}
