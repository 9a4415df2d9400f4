package topology_test

import (
	"testing"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// liveOf builds the snapshot a broker would report after a clean Declare,
// with numbers as the management API's JSON gives them.
func liveOf(tp *topology.Topology) topology.Live {
	live := topology.Live{Exchanges: map[string]topology.LiveExchange{}, Queues: map[string]topology.LiveQueue{}}
	for _, ex := range tp.Exchanges() {
		live.Exchanges[ex] = topology.LiveExchange{Type: "direct", Durable: true}
	}
	for _, q := range tp.Queues() {
		args := map[string]any{}
		for k, v := range q.Args {
			if n, ok := v.(int32); ok {
				args[k] = float64(n)
			} else {
				args[k] = v
			}
		}
		live.Queues[q.Name] = topology.LiveQueue{Durable: true, Args: args}
		live.Bindings = append(live.Bindings, topology.Binding{Exchange: q.Exchange, Queue: q.Name, RoutingKey: q.RoutingKey})
	}
	return live
}

func TestCompareCleanBroker(t *testing.T) {
	t.Parallel()
	tp := seedTopology(t)
	require.Empty(t, tp.Compare(liveOf(tp)))
}

func TestCompareFindsEveryDifference(t *testing.T) {
	t.Parallel()
	tp := seedTopology(t)
	live := liveOf(tp)
	delete(live.Exchanges, "eisland.mini-game.exchange")
	live.Exchanges["eisland.email.verify.exchange"] = topology.LiveExchange{Type: "topic", Durable: true}
	delete(live.Queues, "eisland.email.verify.dlq")
	q := live.Queues["eisland.agent.billing.deduct.retry.queue"]
	q.Args = map[string]any{"x-message-ttl": float64(6000), "x-dead-letter-exchange": "eisland.agent.billing.exchange", "x-dead-letter-routing-key": "eisland.agent.billing.deduct"}
	live.Queues["eisland.agent.billing.deduct.retry.queue"] = q
	live.Queues["eisland.object.replication.process.queue"] = topology.LiveQueue{Durable: true}
	live.Queues["eisland.payment.notify.dlq"] = topology.LiveQueue{Durable: false}
	live.Bindings = live.Bindings[1:] // the email dispatch binding
	live.Queues["eisland.leftover.queue"] = topology.LiveQueue{Durable: true}

	diffs := tp.Compare(live)
	require.True(t, topology.Breaks(diffs))
	var got []string
	for _, d := range diffs {
		got = append(got, d.String())
	}
	require.ElementsMatch(t, []string{
		"missing   exchange eisland.mini-game.exchange",
		"different exchange eisland.email.verify.exchange: type topic, want direct",
		"missing   queue    eisland.email.verify.dlq",
		"different queue    eisland.agent.billing.deduct.retry.queue: argument x-message-ttl=6000, want 5000",
		"different queue    eisland.object.replication.process.queue: argument x-max-priority missing, want 10",
		"different queue    eisland.payment.notify.dlq: durable=false auto_delete=false, want durable and not auto-delete",
		"missing   binding  eisland.email.verify.exchange -[eisland.email.verify.dispatch]-> eisland.email.verify.dispatch.queue",
		"extra     queue    eisland.leftover.queue: not in the table",
	}, got)
}

func TestExtrasDoNotBreak(t *testing.T) {
	t.Parallel()
	tp := seedTopology(t)
	live := liveOf(tp)
	live.Queues["eisland.audit.queue"] = topology.LiveQueue{Durable: true}
	live.Bindings = append(live.Bindings, topology.Binding{Exchange: "eisland.mini-game.exchange", Queue: "eisland.audit.queue", RoutingKey: "x"})
	diffs := tp.Compare(live)
	require.Len(t, diffs, 2)
	require.False(t, topology.Breaks(diffs))
}
