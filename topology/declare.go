package topology

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ExchangeKind is the type of every exchange of the contract.
const ExchangeKind = amqp.ExchangeDirect

// Declare creates every exchange, queue and binding of t on conn. It is
// idempotent: declaring what already exists with the same arguments changes
// nothing. A queue that exists with other arguments cannot be changed by a
// declaration (RabbitMQ answers PRECONDITION_FAILED); Declare reports each such
// conflict and goes on with the rest, so one run names every problem.
// Exchanges come first, so a dead-letter exchange exists before anything can
// be dead-lettered to it.
func (t *Topology) Declare(conn *amqp.Connection) error {
	p := &prober{conn: conn}
	defer p.close()
	var errs []error
	for _, ex := range t.exchanges {
		if err := p.do(declareExchange(ex)); err != nil {
			errs = append(errs, fmt.Errorf("declare exchange %s: %w", ex, err))
		}
	}
	for _, q := range t.Queues() {
		err := p.do(declareQueue(q))
		if err != nil {
			errs = append(errs, fmt.Errorf("declare queue %s: %w", q.Name, err))
			if amqpCode(err) != amqp.PreconditionFailed {
				continue
			}
			// The queue exists with other arguments: still bind it, so its
			// messages are routed rather than dropped until it is fixed.
		}
		err = p.do(func(ch *amqp.Channel) error { return ch.QueueBind(q.Name, q.RoutingKey, q.Exchange, false, nil) })
		if err != nil {
			errs = append(errs, fmt.Errorf("bind queue %s: %w", q.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Ensure makes sure every exchange, queue and binding of t exists on conn,
// for a binary that uses the topology without owning it (the worker, the
// relay, the reconciler: doc/deploy.md, "RabbitMQ users"). It checks each
// exchange and queue with a passive declaration, which needs no
// permission, and declares only what is missing, with the bindings of a
// queue it declared or whose exchange it declared (deleting an exchange
// deletes its bindings). Declaring needs the configure permission, which
// the users of those binaries lack: then the error names what is missing,
// for the api (at its next connection) or `islectl topology apply` to
// declare. Unlike Declare it does not compare arguments: the api's
// declaration and `islectl topology verify` do.
func (t *Topology) Ensure(conn *amqp.Connection) error {
	p := &prober{conn: conn}
	defer p.close()
	var errs []error
	missing := func(err error) bool { return amqpCode(err) == amqp.NotFound }
	redeclared := map[string]bool{}
	for _, ex := range t.exchanges {
		err := p.do(exchangeExists(ex))
		if missing(err) {
			redeclared[ex] = true
			err = p.do(declareExchange(ex))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("exchange %s is missing and was not declared: %w", ex, err))
		}
	}
	for _, q := range t.Queues() {
		err := p.do(queueExists(q))
		if !missing(err) && !redeclared[q.Exchange] {
			if err != nil {
				errs = append(errs, fmt.Errorf("check queue %s: %w", q.Name, err))
			}
			continue
		}
		if missing(err) {
			if err := p.do(declareQueue(q)); err != nil {
				errs = append(errs, fmt.Errorf("queue %s is missing and was not declared: %w", q.Name, err))
				continue
			}
		}
		if err := p.do(func(ch *amqp.Channel) error { return ch.QueueBind(q.Name, q.RoutingKey, q.Exchange, false, nil) }); err != nil {
			errs = append(errs, fmt.Errorf("bind queue %s: %w", q.Name, err))
		}
	}
	return errors.Join(errs...)
}

// declareExchange declares ex as every exchange of the contract is: durable
// and direct. It changes nothing when ex exists so.
func declareExchange(ex string) func(*amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(ex, ExchangeKind, true, false, false, false, nil)
	}
}

// exchangeExists checks that ex exists (a passive declaration).
func exchangeExists(ex string) func(*amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(ex, ExchangeKind, true, false, false, false, nil)
	}
}

// declareQueue declares q durable with its arguments. It changes nothing
// when q exists so, and fails with PRECONDITION_FAILED when its arguments differ.
func declareQueue(q Queue) func(*amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q.Name, true, false, false, false, amqp.Table(q.Args))
		return err
	}
}

// queueExists checks that q exists (a passive declaration), whatever its arguments.
func queueExists(q Queue) func(*amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
		return err
	}
}

// prober runs channel operations, replacing the channel after the broker
// closed it for a failed one (any channel error closes the channel).
type prober struct {
	conn *amqp.Connection
	ch   *amqp.Channel
}

func (p *prober) do(op func(*amqp.Channel) error) error {
	if p.ch == nil || p.ch.IsClosed() {
		ch, err := p.conn.Channel()
		if err != nil {
			return fmt.Errorf("open channel: %w", err)
		}
		p.ch = ch
	}
	return op(p.ch)
}

func (p *prober) close() {
	if p.ch != nil && !p.ch.IsClosed() {
		_ = p.ch.Close()
	}
}

// amqpCode returns the AMQP reply code of err, or 0.
func amqpCode(err error) int {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// amqpReason returns the broker's reply text of err, or "".
func amqpReason(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}
