package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The raw baselines' settings: what a bare amqp091 client does well
// (persistent messages on a durable classic queue, a window of
// unconfirmed publishes, multi-ack), as RabbitMQ's own PerfTest does.
const (
	rawConfirmWindow = 256
	rawPrefetch      = 200
	rawAckEvery      = 100
)

// rawPublish publishes n persistent copies of body(i) to the default
// exchange with routing key queue, keeping up to rawConfirmWindow
// unconfirmed, and returns when the last is confirmed.
func rawPublish(ctx context.Context, url, exchange, key string, n int, body func(i int) []byte) (time.Duration, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	if err := ch.Confirm(false); err != nil {
		return 0, err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, rawConfirmWindow))
	began := time.Now()
	outstanding := 0
	wait := func() error {
		select {
		case c, ok := <-confirms:
			if !ok {
				return errors.New("channel closed before every confirm came")
			}
			if !c.Ack {
				return fmt.Errorf("publish %d nacked", c.DeliveryTag)
			}
			outstanding--
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range n {
		for outstanding >= rawConfirmWindow {
			if err := wait(); err != nil {
				return 0, err
			}
		}
		err := ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body(i),
		})
		if err != nil {
			return 0, err
		}
		outstanding++
	}
	for outstanding > 0 {
		if err := wait(); err != nil {
			return 0, err
		}
	}
	return time.Since(began), nil
}

// rawConsume takes n messages from queue with rawPrefetch unacked and an
// ack for every ackEvery (multiple; 1 acks each message alone), and returns
// how long it took from the first delivery, or from start when start is not
// zero.
func rawConsume(ctx context.Context, url, queue string, n, ackEvery int, start time.Time) (time.Duration, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return consumeOn(ctx, conn, queue, n, ackEvery, start, nil)
}

// consumeOn consumes on a channel of conn; ready, when not nil, is closed
// once the consumer is registered.
func consumeOn(ctx context.Context, conn *amqp.Connection, queue string, n, ackEvery int, start time.Time, ready chan<- struct{}) (time.Duration, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	if err := ch.Qos(rawPrefetch, 0, false); err != nil {
		return 0, err
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, "", false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	if ready != nil {
		close(ready)
	}
	for i := range n {
		var d amqp.Delivery
		select {
		case m, ok := <-deliveries:
			if !ok {
				return 0, errors.New("consumer channel closed")
			}
			d = m
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Minute):
			return 0, fmt.Errorf("no delivery for a minute after %d of %d", i, n)
		}
		if start.IsZero() {
			start = time.Now()
		}
		if (i+1)%ackEvery == 0 || i == n-1 {
			if err := d.Ack(ackEvery > 1); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// rawEndToEnd publishes n messages while a consumer on another connection
// takes them, and returns the time from the first publish to the last
// delivery.
func rawEndToEnd(ctx context.Context, url, queue string, n int, body func(i int) []byte) (time.Duration, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	type result struct {
		took time.Duration
		err  error
	}
	consumed := make(chan result, 1)
	began := time.Now()
	go func() {
		took, err := consumeOn(ctx, conn, queue, n, rawAckEvery, began, ready)
		consumed <- result{took, err}
	}()
	select {
	case <-ready:
	case r := <-consumed:
		return 0, r.err
	}
	began = time.Now()
	if _, err := rawPublish(ctx, url, "", queue, n, body); err != nil {
		return 0, err
	}
	r := <-consumed
	if r.err != nil {
		return 0, r.err
	}
	return time.Since(began), nil
}

// declareRawQueue declares the baselines' durable classic queue, empty.
func declareRawQueue(url, queue string) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		return err
	}
	_, err = ch.QueuePurge(queue, false)
	return err
}

// deleteQueues deletes queues, ignoring those already gone.
func deleteQueues(url string, queues ...string) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	var errs []error
	for _, q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			var ae *amqp.Error
			if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
				errs = append(errs, fmt.Errorf("delete queue %s: %w", q, err))
			}
			continue // the channel is closed by the error
		}
		_ = ch.Close()
	}
	return errors.Join(errs...)
}
