package rabbitadmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// Queues reads every queue's depth and consumers in one request, as the
// broker counts them (its statistics lag by up to 5 s).
func TestQueuesCountsDepthAndConsumers(t *testing.T) {
	t.Parallel()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	require.NoError(t, admin.Ping(context.Background()))

	dom, _ := tp.Domain(topology.DomainEmail)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	for range 3 {
		require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{Body: []byte("{}")}))
	}
	_, err = ch.Consume(dom.DLQ, "", false, false, false, false, nil)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		qs, err := admin.Queues(context.Background())
		require.NoError(t, err)
		main, dlq := qs[dom.Queue], qs[dom.DLQ]
		return main.Counted && main.Messages() == 3 && dlq.Consumers == 1
	}, 20*time.Second, 250*time.Millisecond)
	qs, err := admin.Queues(context.Background())
	require.NoError(t, err)
	for _, q := range tp.Queues() {
		require.Contains(t, qs, q.Name, "every declared queue is listed")
	}
}

func TestPingFailsWithoutTheManagementAPI(t *testing.T) {
	t.Parallel()
	admin, err := rabbitadmin.New("http://127.0.0.1:1", "/")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.Error(t, admin.Ping(ctx))
}
