package topology

import (
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Probe checks t against the broker over AMQP alone, for brokers without the
// management API. It finds missing exchanges and queues (passive declares) and
// different arguments (a declaration with the table's arguments, which the
// broker refuses when they differ and which changes nothing when they match).
// AMQP cannot list bindings, so Probe does not check them; a missing binding
// needs Compare with a management snapshot.
func (t *Topology) Probe(conn *amqp.Connection) ([]Difference, error) {
	p := &prober{conn: conn}
	defer p.close()
	var diffs []Difference
	check := func(object, name string, passive, active func(*amqp.Channel) error) error {
		err := p.do(passive)
		switch {
		case amqpCode(err) == amqp.NotFound:
			diffs = append(diffs, Difference{Severity: Missing, Object: object, Name: name})
			return nil
		case err != nil:
			return err
		}
		err = p.do(active)
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
			diffs = append(diffs, Difference{Severity: Different, Object: object, Name: name, Detail: ae.Reason})
			return nil
		}
		return err
	}
	for _, ex := range t.exchanges {
		err := check("exchange", ex,
			func(ch *amqp.Channel) error {
				return ch.ExchangeDeclarePassive(ex, ExchangeKind, true, false, false, false, nil)
			},
			func(ch *amqp.Channel) error {
				return ch.ExchangeDeclare(ex, ExchangeKind, true, false, false, false, nil)
			})
		if err != nil {
			return nil, err
		}
	}
	for _, q := range t.Queues() {
		err := check("queue", q.Name,
			func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
				return err
			},
			func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclare(q.Name, true, false, false, false, amqp.Table(q.Args))
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return diffs, nil
}
