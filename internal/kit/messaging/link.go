package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/testsignal"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Connection settings of the publisher.
const (
	heartbeat      = 10 * time.Second // a dead peer is noticed within a few of these
	dialTimeout    = 10 * time.Second // TCP connect plus the AMQP handshake
	closeTimeout   = 2 * time.Second  // bound on the close handshake with the broker
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 5 * time.Second
)

// ErrPublisherClosed is returned by a publish after Close.
var ErrPublisherClosed = errors.New("messaging: publisher closed")

// link is the publisher's connection. It dials, declares the topology, and
// keeps its confirm channels open; when the connection is lost it reconnects
// in the background with backoff, declaring the topology again before any
// channel takes a publish. Publishes reach the channels through reqs, which
// only live channels read: while the link is down a publish waits there, up
// to its own deadline.
type link struct {
	urls     []string // tried in order; a reconnect starts after the one lost
	at       int      // index in urls of the current or last connection
	name     string
	channels int
	declare  func(*amqp.Connection) error
	log      *slog.Logger

	reqs   chan *request
	ctx    context.Context // canceled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu      sync.Mutex
	up      bool   // connected, topology declared
	open    int    // confirm channels taking publishes
	blocked string // the broker's reason while it blocks the connection
	lastErr error  // why the link went down, or why the last reconnect failed
	since   time.Time

	reconnectFailed testsignal.Signal[error] // a reconnect attempt failed: for tests, off otherwise
}

// session is one connection and the goroutines of its channels.
type session struct {
	conn    *amqp.Connection
	raw     net.Conn // its socket
	lost    chan *amqp.Error
	blocked chan amqp.Blocking
	chans   sync.WaitGroup
}

// dialLink connects once (an error is returned, not retried) and then keeps
// the connection in the background until close.
func dialLink(l *link) (*link, error) {
	l.reqs = make(chan *request)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.done = make(chan struct{})
	s, err := l.connect(true)
	if err != nil {
		l.cancel()
		return nil, err
	}
	l.setState(true, nil)
	go l.run(s)
	return l, nil
}

// close closes the connection and waits for every goroutine of the link.
// Publishes in flight fail; later ones get ErrPublisherClosed. It may be
// called any number of times, also while the link is down.
func (l *link) close() {
	l.cancel()
	<-l.done
}

func (l *link) run(s *session) {
	defer close(l.done)
	for {
		err := l.hold(s)
		l.setState(false, err)
		s.chans.Wait()
		if l.ctx.Err() != nil {
			l.setState(false, ErrPublisherClosed)
			return
		}
		l.log.Warn("RabbitMQ publisher connection lost; reconnecting", "err", err)
		if s = l.reconnect(); s == nil {
			l.setState(false, ErrPublisherClosed)
			return
		}
	}
}

// hold returns when s's connection is lost, or closes it when the link closes.
func (l *link) hold(s *session) error {
	for {
		select {
		case b, ok := <-s.blocked:
			if !ok {
				s.blocked = nil
				continue
			}
			l.setBlocked(b)
		case err, ok := <-s.lost:
			// A writer may be stuck on the socket of a peer that stopped
			// reading; closing it lets the channels wind down.
			_ = s.raw.Close()
			if !ok || err == nil {
				return errors.New("connection closed")
			}
			return err
		case <-l.ctx.Done():
			_ = s.conn.CloseDeadline(time.Now().Add(closeTimeout))
			return ErrPublisherClosed
		}
	}
}

// reconnect dials until it succeeds, or returns nil when the link closes.
func (l *link) reconnect() *session {
	began := time.Now()
	for attempt := 0; ; attempt++ {
		if !sleep(l.ctx, backoff(attempt)) {
			return nil
		}
		s, err := l.connect(false)
		if err == nil {
			l.setState(true, nil)
			l.log.Info("RabbitMQ publisher reconnected", "addr", hostOf(l.urls[l.at]), "down_for", time.Since(began).Round(time.Millisecond), "attempts", attempt+1)
			return s
		}
		if l.ctx.Err() != nil {
			return nil
		}
		l.setState(false, err)
		l.log.Warn("RabbitMQ publisher could not reconnect", "attempt", attempt+1, "err", err)
		l.reconnectFailed.Send(err)
	}
}

// connect dials, declares the topology and starts the channels. A failed
// declaration fails the first connect; on a reconnect it is logged and the
// channels start anyway (Declare still binds a queue whose arguments differ,
// so messages are routed), unless the connection itself is gone.
func (l *link) connect(first bool) (*session, error) {
	start := 0
	if !first {
		start = l.at + 1
	}
	conn, raw, at, stopDial, err := dial(l.ctx, l.urls, start, l.name)
	if err != nil {
		return nil, err
	}
	defer stopDial()
	l.at = at
	s := &session{conn: conn, raw: raw}
	s.lost = conn.NotifyClose(make(chan *amqp.Error, 1))
	s.blocked = conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	if err := l.declare(conn); err != nil {
		if first || conn.IsClosed() {
			_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
			return nil, fmt.Errorf("declare topology: %w", err)
		}
		l.log.Error("RabbitMQ publisher: topology declared with errors", "err", err)
	}
	for range l.channels {
		ch, err := l.openConfirm(conn)
		if err != nil && first {
			_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
			s.chans.Wait()
			return nil, fmt.Errorf("open a channel: %w", err)
		}
		s.chans.Go(func() { l.keepChannel(conn, ch) })
	}
	return s, nil
}

// openConfirm opens a channel in confirm mode and counts it as open.
func (l *link) openConfirm(conn *amqp.Connection) (*amqp.Channel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	l.addOpen(1)
	return ch, nil
}

// keepChannel keeps one confirm channel open on conn until conn closes,
// starting with ch (nil: open one). A channel the broker closes alone (a
// publish to an exchange that was deleted) is reopened after the topology is
// declared again.
func (l *link) keepChannel(conn *amqp.Connection, ch *amqp.Channel) {
	for attempt := 0; ; attempt++ {
		var err error
		if ch == nil {
			ch, err = l.openConfirm(conn)
		}
		if ch != nil {
			began := time.Now()
			err = serveChannel(ch, l.reqs, l.requeue)
			l.addOpen(-1)
			ch = nil
			if time.Since(began) > reconnectMax {
				attempt = 0
			}
		}
		if conn.IsClosed() || l.ctx.Err() != nil {
			return
		}
		l.log.Warn("RabbitMQ publish channel closed; reopening it", "err", err)
		if !sleep(l.ctx, backoff(attempt+1)) {
			return
		}
		if err := l.declare(conn); err != nil && !conn.IsClosed() {
			l.log.Error("RabbitMQ publisher: topology declared with errors", "err", err)
		}
	}
}

// requeue hands a request that was never sent (its channel had closed) to
// another channel.
func (l *link) requeue(r *request) {
	go func() {
		select {
		case l.reqs <- r:
		case <-r.ctx.Done():
			r.answer(fmt.Errorf("%w (%v)", ErrUnconfirmed, r.ctx.Err()))
		case <-l.ctx.Done():
			r.answer(ErrPublisherClosed)
		}
	}()
}

// publish hands msg to a channel and waits for the broker's answer, at most
// until ctx ends.
func (l *link) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	r, err := l.enqueue(ctx, exchange, key, msg)
	if err != nil {
		return err
	}
	return l.await(ctx, r)
}

// enqueue hands msg to a channel, which publishes it without waiting for
// its confirm; await waits for that. Many enqueued before any is awaited
// are in flight together.
func (l *link) enqueue(ctx context.Context, exchange, key string, msg amqp.Publishing) (*request, error) {
	if l.ctx.Err() != nil {
		return nil, ErrPublisherClosed
	}
	r := &request{ctx: ctx, exchange: exchange, key: key, msg: msg, done: make(chan error, 1)}
	select {
	case l.reqs <- r:
		return r, nil
	case <-l.ctx.Done():
		return nil, ErrPublisherClosed
	case <-ctx.Done():
		if err := l.ready(); err != nil {
			return nil, fmt.Errorf("%w: no channel took it in time (%v): %w", ErrUnconfirmed, ctx.Err(), err)
		}
		return nil, fmt.Errorf("%w: no channel took it in time (%v)", ErrUnconfirmed, ctx.Err())
	}
}

// await waits for the broker's answer to r, at most until ctx ends.
func (l *link) await(ctx context.Context, r *request) error {
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w (%v)", ErrUnconfirmed, ctx.Err())
	}
}

// ready reports whether the link can publish now: connected, with an open
// channel, and not blocked by the broker.
func (l *link) ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.up && errors.Is(l.lastErr, ErrPublisherClosed):
		return ErrPublisherClosed
	case !l.up:
		return fmt.Errorf("messaging: RabbitMQ publisher disconnected for %v: %w", time.Since(l.since).Round(time.Millisecond), l.lastErr)
	case l.blocked != "":
		return fmt.Errorf("messaging: RabbitMQ blocks publishing for %v: %s", time.Since(l.since).Round(time.Millisecond), l.blocked)
	case l.open == 0:
		return errors.New("messaging: RabbitMQ publisher has no open channel")
	}
	return nil
}

func (l *link) setState(up bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up != up || l.since.IsZero() {
		l.since = time.Now()
	}
	l.up, l.lastErr, l.blocked = up, err, ""
}

func (l *link) setBlocked(b amqp.Blocking) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.blocked, l.since = "", time.Now()
	if b.Active {
		l.blocked = b.Reason
		l.log.Warn("RabbitMQ blocks publishing", "reason", b.Reason)
	} else {
		l.log.Info("RabbitMQ unblocked publishing")
	}
}

func (l *link) addOpen(n int) {
	l.mu.Lock()
	l.open += n
	l.mu.Unlock()
}

// backoff is the pause before reconnect attempt n: none before the first,
// then doubling from reconnectFirst up to reconnectMax, with jitter.
func backoff(n int) time.Duration {
	if n == 0 {
		return 0
	}
	d := min(reconnectFirst<<min(n-1, 16), reconnectMax)
	return d/2 + rand.N(d/2)
}

// sleep waits d, or returns false at once when ctx ends.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
