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

func TestDeclareThenVerifyOnTheBroker(t *testing.T) {
	t.Parallel()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	compare := func() []topology.Difference {
		live, err := admin.Snapshot(context.Background())
		require.NoError(t, err)
		return tp.Compare(live)
	}
	probe := func() []topology.Difference {
		diffs, err := tp.Probe(conn)
		require.NoError(t, err)
		return diffs
	}

	require.NoError(t, tp.Declare(conn))
	require.NoError(t, tp.Declare(conn), "declaring again changes nothing")
	require.Empty(t, compare())
	require.Empty(t, probe())

	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()

	// A deleted queue is named by both checks.
	_, err = ch.QueueDelete(prefix+".email.verify.dlq", false, false, false)
	require.NoError(t, err)
	want := topology.Difference{Severity: topology.Missing, Object: "queue", Name: prefix + ".email.verify.dlq"}
	require.Equal(t, []topology.Difference{want}, compare())
	require.Equal(t, []topology.Difference{want}, probe())

	// The same name re-declared with another TTL.
	retry := prefix + ".agent.billing.deduct.retry.queue"
	_, err = ch.QueueDelete(retry, false, false, false)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(retry, true, false, false, false, amqp.Table{
		"x-message-ttl": int32(6000), "x-dead-letter-exchange": prefix + ".agent.billing.exchange",
		"x-dead-letter-routing-key": prefix + ".agent.billing.deduct",
	})
	require.NoError(t, err)
	diffs := compare()
	require.Contains(t, diffs, topology.Difference{Severity: topology.Different, Object: "queue", Name: retry,
		Detail: "argument x-message-ttl=6000, want 5000"})
	require.Contains(t, diffs, topology.Difference{Severity: topology.Missing, Object: "binding",
		Name: prefix + ".agent.billing.exchange -[" + prefix + ".agent.billing.deduct.retry]-> " + retry})
	diffs = probe()
	require.Len(t, diffs, 2)
	require.Equal(t, retry, diffs[1].Name)
	require.Contains(t, diffs[1].Detail, "inequivalent arg 'x-message-ttl'")

	// Declare repairs what it can and names what it cannot.
	err = tp.Declare(conn)
	require.ErrorContains(t, err, retry)
	require.ErrorContains(t, err, "PRECONDITION_FAILED")
	require.Len(t, compare(), 1)
}

// Ensure declares what is missing, binding again the queues of an
// exchange it declared, and leaves what exists as it is: it does not
// compare arguments (Declare and Probe do), so that a binary whose user
// may not declare checks the topology with passive declarations alone.
func TestEnsureDeclaresOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	compare := func() []topology.Difference {
		live, err := admin.Snapshot(context.Background())
		require.NoError(t, err)
		return tp.Compare(live)
	}

	require.NoError(t, tp.Ensure(conn), "an empty broker")
	require.Empty(t, compare())
	require.NoError(t, tp.Ensure(conn), "again: nothing to do")

	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	// An exchange deleted with its bindings, and a queue.
	require.NoError(t, ch.ExchangeDelete(prefix+".mini-game.exchange", false, false))
	_, err = ch.QueueDelete(prefix+".email.verify.dlq", false, false, false)
	require.NoError(t, err)
	require.NotEmpty(t, compare())
	require.NoError(t, tp.Ensure(conn))
	require.Empty(t, compare(), "declared and bound again")

	// A queue of other arguments is left as it is.
	retry := prefix + ".agent.billing.deduct.retry.queue"
	_, err = ch.QueueDelete(retry, false, false, false)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(retry, true, false, false, false, amqp.Table{
		"x-message-ttl": int32(6000), "x-dead-letter-exchange": prefix + ".agent.billing.exchange",
		"x-dead-letter-routing-key": prefix + ".agent.billing.deduct",
	})
	require.NoError(t, err)
	require.NoError(t, tp.Ensure(conn))
	require.Contains(t, compare(), topology.Difference{Severity: topology.Different, Object: "queue", Name: retry,
		Detail: "argument x-message-ttl=6000, want 5000"})
}
