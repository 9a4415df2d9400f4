package messaging

// The subscriber's one connection: dialled at the first Subscribe, kept
// (redialled after a loss, every subscription opening its channels again
// on the new one) until Close.

import (
	"context"
	"fmt"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// connection returns the current connection, dialling the first one (whose
// error is returned) or waiting for a reconnect until ctx ends.
func (s *Subscriber) connection(ctx context.Context) (*amqp.Connection, error) {
	s.mu.Lock()
	if !s.keeping {
		defer s.mu.Unlock()
		select {
		case <-s.closing:
			return nil, ErrSubscriberClosed
		default:
		}
		conn, raw, at, stop, err := dial(ctx, s.cfg.URLs, 0, s.cfg.Name)
		stop()
		if err != nil {
			return nil, fmt.Errorf("messaging: subscriber: %w", err)
		}
		s.at = at
		s.keeping = true
		s.setConn(conn, raw)
		go s.keep(conn, raw)
		return conn, nil
	}
	for s.conn == nil {
		up := s.up
		s.mu.Unlock()
		select {
		case <-up:
		case <-s.closing:
			return nil, ErrSubscriberClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	return s.conn, nil
}

// setConn makes conn current; s.mu is held.
func (s *Subscriber) setConn(conn *amqp.Connection, raw net.Conn) {
	s.conn, s.raw = conn, raw
	close(s.up)
}

// keep watches the connection and replaces it when it is lost: at once,
// then with backoff while the broker refuses.
func (s *Subscriber) keep(conn *amqp.Connection, raw net.Conn) {
	defer close(s.kept)
	for {
		lost := conn.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case <-s.closing:
			return
		case err := <-lost:
			_ = raw.Close() // a channel may be stuck writing to a peer that stopped reading
			s.mu.Lock()
			s.conn, s.raw, s.up = nil, nil, make(chan struct{})
			s.mu.Unlock()
			s.log.Warn("RabbitMQ subscriber connection lost; reconnecting", "err", err)
		}
		began := time.Now()
		for attempt := 0; ; attempt++ {
			if !s.pause(backoff(attempt)) {
				return
			}
			var err error
			var at int
			var stop func()
			s.reconnecting.Send(attempt)
			conn, raw, at, stop, err = dial(context.Background(), s.cfg.URLs, s.at+1, s.cfg.Name)
			stop()
			if err == nil {
				s.at = at
				s.log.Info("RabbitMQ subscriber reconnected", "addr", hostOf(s.cfg.URLs[at]), "down_for", time.Since(began).Round(time.Millisecond), "attempts", attempt+1)
				break
			}
			s.log.Warn("RabbitMQ subscriber could not reconnect", "attempt", attempt+1, "err", err)
		}
		s.mu.Lock()
		select {
		case <-s.closing:
			// Close began while we dialled, and took no connection to
			// close: this one is ours to close.
			s.mu.Unlock()
			_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
			return
		default:
		}
		s.setConn(conn, raw)
		s.mu.Unlock()
	}
}

// pause waits d; false when the subscriber closes first.
func (s *Subscriber) pause(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-s.closing:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.closing:
		return false
	case <-t.C:
		return true
	}
}
