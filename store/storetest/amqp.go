package storetest

import (
	"testing"

	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP returns a connection to the test RabbitMQ and a name prefix of the
// test's own. When the test ends, every queue and exchange the contract
// names under that prefix is deleted.
func AMQP(t testing.TB) (*amqp.Connection, string) {
	t.Helper()
	Services(t)
	prefix := Unique("t")
	conn, err := amqp.Dial(AMQPURL())
	if err != nil {
		t.Fatalf("storetest: RabbitMQ at %s is not reachable (scripts/test starts it): %v", AMQPURL(), err)
	}
	t.Cleanup(func() {
		c := conn
		if c.IsClosed() {
			// The broker dropped it (a test that restarts RabbitMQ): clean
			// up on a connection of its own.
			if c, err = amqp.Dial(AMQPURL()); err != nil {
				t.Errorf("storetest: delete topology %s: %v", prefix, err)
				return
			}
		}
		defer c.Close()
		DeleteTopology(t, c, prefix)
	})
	return conn, prefix
}

// DeleteTopology deletes every queue and exchange of the contract under prefix.
func DeleteTopology(t testing.TB, conn *amqp.Connection, prefix string) {
	t.Helper()
	tp, err := topology.New(topology.Config{Prefix: prefix})
	if err != nil {
		t.Errorf("storetest: %v", err)
		return
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("storetest: delete topology %s: %v", prefix, err)
		return
	}
	defer ch.Close()
	for _, q := range tp.Queues() {
		if _, err := ch.QueueDelete(q.Name, false, false, false); err != nil {
			t.Errorf("storetest: delete queue %s: %v", q.Name, err)
			return
		}
	}
	for _, ex := range tp.Exchanges() {
		if err := ch.ExchangeDelete(ex, false, false); err != nil {
			t.Errorf("storetest: delete exchange %s: %v", ex, err)
			return
		}
	}
}

// QueueDepth returns the number of ready messages in queue. It asks with a
// passive declare on a channel of its own: the broker closes the channel of
// a passive declare that fails, which must not take the caller's with it.
func QueueDepth(t testing.TB, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("storetest: queue depth of %s: %v", queue, err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("storetest: queue depth of %s: %v", queue, err)
	}
	return q.Messages
}
