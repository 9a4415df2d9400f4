package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnconfirmed is returned when the broker did not confirm a publish:
// the deadline passed first (a blocked or stuck broker, or no connection to
// publish on), or the connection or channel was lost before the confirm came.
// The message may still arrive: a caller that retries can cause a
// duplicate, never a loss.
var ErrUnconfirmed = errors.New("messaging: publish not confirmed")

// errNacked and errReturned are the broker's refusals: a nack (an internal
// error of the queue), or a return (no queue is bound to the routing key).
var (
	errNacked   = errors.New("messaging: the broker refused the message (nack)")
	errReturned = errors.New("messaging: the broker returned the message as unroutable")
)

// request is one publish on its way to a confirm channel. It is answered
// exactly once, by whoever takes it out of a channel's pending set (or, if it
// never got there, by whoever holds it).
type request struct {
	ctx      context.Context
	exchange string
	key      string
	msg      amqp.Publishing
	done     chan error // buffered: the answer never blocks
}

func (r *request) answer(err error) { r.done <- err }

// confirmChannel is one channel in confirm mode carrying many publishes in
// flight: a writer publishes each request without waiting, and a confirmer
// answers each one when its confirm arrives.
type confirmChannel struct {
	ch       *amqp.Channel
	mu       sync.Mutex
	pending  map[uint64]*request      // delivery tag -> request
	returned map[string][]amqp.Return // message id -> returns awaiting their confirm; confirmer only
}

// serveChannel publishes requests from reqs on ch until ch closes, and
// answers every request it took: confirmed (nil), nacked or returned (an
// error), or lost with the channel (ErrUnconfirmed). A request that could not
// be sent at all goes to requeue.
func serveChannel(ch *amqp.Channel, reqs <-chan *request, requeue func(*request)) error {
	c := &confirmChannel{ch: ch, pending: map[uint64]*request{}, returned: map[string][]amqp.Return{}}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	// Unbuffered on purpose: the library hands over a return before it
	// handles the confirm that follows it, so the confirmer has always seen
	// a message's return when its confirm comes.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirmed := make(chan struct{})
	go func() {
		defer close(confirmed)
		c.confirm(confirms, returns)
	}()
	reason := errors.New("channel closed")
	for serving := true; serving; {
		select {
		case r := <-reqs:
			c.publish(r, requeue)
		case err, ok := <-closed:
			if ok && err != nil {
				reason = err
			}
			serving = false
		}
	}
	<-confirmed
	c.failAll(reason)
	return reason
}

// publish sends r without waiting for its confirm. Its tag is registered
// first, so the confirm always finds it.
func (c *confirmChannel) publish(r *request, requeue func(*request)) {
	if err := r.ctx.Err(); err != nil {
		r.answer(fmt.Errorf("%w (%v)", ErrUnconfirmed, err))
		return
	}
	// This goroutine is the channel's only publisher, so the tag holds until
	// it publishes. It is read outside c.mu: the library may hold its own
	// lock while it waits for the confirmer, which may wait for c.mu.
	tag := c.ch.GetNextPublishSeqNo()
	c.mu.Lock()
	c.pending[tag] = r
	c.mu.Unlock()
	_, err := c.ch.PublishWithDeferredConfirmWithContext(r.ctx, r.exchange, r.key, true, false, r.msg)
	if err == nil {
		return
	}
	c.mu.Lock()
	mine := c.pending[tag] == r
	if mine {
		delete(c.pending, tag)
	}
	c.mu.Unlock()
	switch {
	case !mine: // the channel closed meanwhile and failAll answered it
	case r.ctx.Err() != nil:
		r.answer(fmt.Errorf("%w (%v)", ErrUnconfirmed, r.ctx.Err()))
	case errors.Is(err, amqp.ErrClosed) || c.ch.IsClosed():
		requeue(r) // nothing reached the broker; another channel takes it
	default:
		r.answer(fmt.Errorf("messaging: publish: %w", err))
	}
}

// confirm answers requests as their confirms arrive, until the channel's
// confirm listener closes with it.
func (c *confirmChannel) confirm(confirms <-chan amqp.Confirmation, returns <-chan amqp.Return) {
	for {
		select {
		case ret, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			c.returned[ret.MessageId] = append(c.returned[ret.MessageId], ret)
		case cf, ok := <-confirms:
			if !ok {
				return
			}
			c.resolve(cf)
		}
	}
}

func (c *confirmChannel) resolve(cf amqp.Confirmation) {
	c.mu.Lock()
	r := c.pending[cf.DeliveryTag]
	delete(c.pending, cf.DeliveryTag)
	c.mu.Unlock()
	if r == nil {
		return
	}
	// A return precedes its message's confirm on the channel. Two messages
	// with one id in flight on one channel could swap returns; both went to
	// the same routing key in every case Isle has.
	if rets := c.returned[r.msg.MessageId]; len(rets) > 0 {
		c.returned[r.msg.MessageId] = rets[1:]
		if len(rets) == 1 {
			delete(c.returned, r.msg.MessageId)
		}
		r.answer(fmt.Errorf("%w: %d %s (exchange %q, routing key %q)", errReturned, rets[0].ReplyCode, rets[0].ReplyText, r.exchange, r.key))
		return
	}
	if !cf.Ack {
		r.answer(errNacked)
		return
	}
	r.answer(nil)
}

// failAll answers every request still waiting for a confirm: the channel is
// gone, and the message may or may not have arrived.
func (c *confirmChannel) failAll(reason error) {
	c.mu.Lock()
	pending := c.pending
	c.pending = map[uint64]*request{}
	c.mu.Unlock()
	for _, r := range pending {
		r.answer(fmt.Errorf("%w: channel lost before the confirm (%v); the message may have arrived", ErrUnconfirmed, reason))
	}
}
