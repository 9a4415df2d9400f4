package topology

import amqp "github.com/rabbitmq/amqp091-go"

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
		if amqpCode(err) == amqp.PreconditionFailed {
			diffs = append(diffs, Difference{Severity: Different, Object: object, Name: name, Detail: amqpReason(err)})
			return nil
		}
		return err
	}
	for _, ex := range t.exchanges {
		if err := check("exchange", ex, exchangeExists(ex), declareExchange(ex)); err != nil {
			return nil, err
		}
	}
	for _, q := range t.Queues() {
		if err := check("queue", q.Name, queueExists(q), declareQueue(q)); err != nil {
			return nil, err
		}
	}
	return diffs, nil
}
