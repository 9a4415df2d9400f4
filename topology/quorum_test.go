package topology_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// replicationQueue is the prefixed name of the priority queue.
func replicationQueue(t *testing.T, prefix string) string {
	t.Helper()
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	d, ok := tp.Domain(topology.DomainObjectReplication)
	require.True(t, ok)
	return d.Queue
}

func TestQueueTypeSettings(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	require.Equal(t, topology.QueueClassic, tp.QueueType())
	for _, q := range tp.Queues() {
		require.NotContains(t, q.Args, "x-queue-type", "classic queues carry no type argument, as the Spring backend declares them")
	}

	_, err = topology.New(topology.Config{QueueType: "lazy"})
	require.ErrorContains(t, err, `queue type "lazy"`)

	// The priority queue cannot be a quorum queue: refused, naming it.
	_, err = topology.New(topology.Config{QueueType: topology.QueueQuorum})
	require.ErrorContains(t, err, replicationQueue(t, "")+": a quorum queue cannot keep its x-max-priority")

	_, err = topology.New(topology.Config{QueueType: topology.QueueQuorum, ClassicQueues: []string{"eisland.nowhere"}})
	require.ErrorContains(t, err, `classic queue "eisland.nowhere": no such queue`)

	tp, err = topology.New(topology.Config{QueueType: topology.QueueQuorum, ClassicQueues: []string{replicationQueue(t, "")}})
	require.NoError(t, err)
	for _, q := range tp.Queues() {
		if q.Name == replicationQueue(t, "") {
			require.NotContains(t, q.Args, "x-queue-type")
			require.Contains(t, q.Args, "x-max-priority")
			continue
		}
		require.Equal(t, topology.QueueQuorum, q.Args["x-queue-type"], q.Name)
	}
}

// Quorum queues declare on the local single node; the broker then reports
// them so, and verify finds no difference.
func TestDeclareQuorumQueuesOnTheBroker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	conn, prefix := storetest.AMQP(t) // deletes what it declared at the end
	classic := replicationQueue(t, prefix)
	tp, err := topology.New(topology.Config{Prefix: prefix, QueueType: topology.QueueQuorum, ClassicQueues: []string{classic}})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	require.NoError(t, tp.Declare(conn), "declaring again changes nothing")

	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	live, err := admin.Snapshot(context.Background())
	require.NoError(t, err)
	for _, q := range tp.Queues() {
		lq, ok := live.Queues[q.Name]
		require.True(t, ok, q.Name)
		if q.Name == classic {
			require.NotEqual(t, topology.QueueQuorum, lq.Args["x-queue-type"])
			continue
		}
		require.Equal(t, topology.QueueQuorum, lq.Args["x-queue-type"], q.Name)
	}
	for _, d := range tp.Compare(live) {
		if d.Severity != topology.Extra {
			t.Errorf("difference: %s", d)
		}
	}
}

// RabbitMQ refuses to redeclare a classic queue as a quorum queue
// (PRECONDITION_FAILED): the reason a queue type change is made on both
// sides of the broker at once (doc/contract.md, "Queue type").
func TestClassicQueueCannotBeRedeclaredQuorum(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	conn, prefix := storetest.AMQP(t)
	classic, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, classic.Declare(conn))

	quorum, err := topology.New(topology.Config{Prefix: prefix, QueueType: topology.QueueQuorum, ClassicQueues: []string{replicationQueue(t, prefix)}})
	require.NoError(t, err)
	err = quorum.Declare(conn)
	var amqpErr *amqp.Error
	require.ErrorAs(t, err, &amqpErr)
	require.Equal(t, amqp.PreconditionFailed, amqpErr.Code, amqpErr.Reason)
	// A retry queue adds only its type; a main queue's first difference
	// may be its dead-letter arguments.
	require.ErrorContains(t, err, "inequivalent arg 'x-queue-type' for queue '"+prefix+".email.verify.retry.queue'")
}
