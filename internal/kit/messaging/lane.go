package messaging

import (
	"context"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// lane is one channel of a subscription, opened again after it is lost.
type lane struct {
	sub        *subscription
	tag        string
	conn       *amqp.Connection
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
}

func (l *lane) run() {
	s := l.sub.s
	defer s.lanes.Done()
	forwarded := sync.OnceFunc(l.sub.forwarding.Done)
	defer forwarded()
	for {
		st := newAcker(l.ch, 2*l.sub.prefetch, &s.stats)
		if stopped := l.forward(st); stopped {
			forwarded()
			select {
			case <-st.wait():
			case <-s.hard.Done():
			}
			st.stop()
			_ = l.ch.Close() // what was never handed out goes back to the queue
			return
		}
		// The channel or its connection is gone: so are its deliveries'
		// acks, and the broker requeues what it held. Handlers still at work
		// are not waited for; their contexts end (ErrChannelLost).
		st.stop()
		_ = l.ch.Close()
		if !l.reopen() {
			return
		}
	}
}

// reopen consumes again on the current connection, once there is one: at
// once after a reconnect, after a pause when the channel failed alone (its
// queue was deleted, the broker cancelled the consumer). False when the
// subscription stops first.
func (l *lane) reopen() bool {
	s := l.sub.s
	for {
		if !l.conn.IsClosed() {
			s.log.Warn("consumer cancelled by the broker or its channel closed; consuming again", "queue", l.sub.topic)
			if !l.wait(resubscribeEvery) {
				return false
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-l.sub.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		conn, err := s.connection(ctx)
		cancel()
		if err != nil {
			return false
		}
		l.conn = conn
		if l.ch, l.deliveries, err = l.sub.open(conn, l.tag); err == nil {
			s.log.Info("consuming again", "queue", l.sub.topic)
			return true
		}
		s.log.Warn("cannot consume yet", "queue", l.sub.topic, "err", err)
		s.consumeFailed.Send(err)
		if !conn.IsClosed() && !l.wait(resubscribeEvery) {
			return false
		}
	}
}

// wait pauses d; false when the subscription stops first.
func (l *lane) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.sub.stop:
		return false
	case <-t.C:
		return true
	}
}

// forward hands the channel's deliveries out until the subscription stops
// (true) or the deliveries end (false: the channel or connection is gone,
// or the broker cancelled the consumer).
func (l *lane) forward(st *acker) bool {
	for {
		select {
		case <-l.sub.stop:
			return l.finish(st)
		default:
		}
		select {
		case <-l.sub.stop:
			return l.finish(st)
		case d, ok := <-l.deliveries:
			if !ok {
				return false
			}
			var giveUp <-chan struct{} = l.sub.stop
			if l.sub.s.cfg.FinishHeld {
				giveUp = l.sub.s.hard.Done()
			}
			if !l.hand(d, st, giveUp) {
				return l.finish(st)
			}
		}
	}
}

// finish ends a lane's part in a stop. With FinishHeld the consumer is
// cancelled, so the broker sends no more, and what the library still holds
// is handed out until it closes the deliveries (after the broker's
// cancel-ok); otherwise it goes back to the queue with the channel.
func (l *lane) finish(st *acker) bool {
	s := l.sub.s
	if !s.cfg.FinishHeld {
		return true
	}
	if err := l.ch.Cancel(l.tag, false); err != nil {
		return true
	}
	for d := range l.deliveries {
		if !l.hand(d, st, s.hard.Done()) {
			return true
		}
	}
	return true
}

// hand gives d out as a message, and acks or nacks it with the broker when its
// handler acks or nacks it. False, with d kept back for the queue, when
// giveUp closes before a reader takes it.
func (l *lane) hand(d amqp.Delivery, st *acker, giveUp <-chan struct{}) bool {
	s := l.sub.s
	msg, cancel := s.message(d, l.sub.topic)
	st.add(d.DeliveryTag, msg, msg.Context().Done(), cancel)
	select {
	case l.sub.out <- msg:
		return true
	case <-giveUp:
		cancel(nil)
		st.keep(d.DeliveryTag)
		return false
	}
}
