package config_test

import (
	"testing"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

func TestRabbitAddrs(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWorker(env(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"amqp://guest:guest@127.0.0.1:5672/"}, c.AMQP.URLs, "empty: RABBITMQ_HOST:RABBITMQ_PORT")

	c, err = config.LoadWorker(env(map[string]string{
		"RABBITMQ_ADDRS": "127.0.0.1:1, rabbit-2:5673,[::1]:5674", "RABBITMQ_VHOST": "isle",
		"RABBITMQ_HOST": "unused", "RABBITMQ_PASSWORD": "p@ss",
	}))
	require.NoError(t, err)
	require.Equal(t, []string{
		"amqp://guest:p%40ss@127.0.0.1:1/isle",
		"amqp://guest:p%40ss@rabbit-2:5673/isle",
		"amqp://guest:p%40ss@[::1]:5674/isle",
	}, c.AMQP.URLs)
	require.Equal(t, c.AMQP.URLs[0], c.AMQP.URL)

	_, err = config.LoadWorker(env(map[string]string{"RABBITMQ_ADDRS": "rabbit-1,:5672,rabbit-3:0,rabbit-4:amqp,rabbit-5:5672"}))
	require.Error(t, err)
	for _, bad := range []string{"rabbit-1", ":5672", "rabbit-3:0", "rabbit-4:amqp"} {
		require.ErrorContains(t, err, `RABBITMQ_ADDRS="`+bad+`": want host:port`)
	}
	require.NotContains(t, err.Error(), "rabbit-5")
}

func TestRabbitManagementURLs(t *testing.T) {
	t.Parallel()
	c, err := config.LoadReconcile(env(map[string]string{
		"RABBITMQ_MANAGEMENT_URL": "http://rabbit-1:15672, https://admin:secret@rabbit-2/",
		"RABBITMQ_PASSWORD":       "a,b",
	}))
	require.NoError(t, err)
	require.Equal(t, "http://guest:a%2Cb@rabbit-1:15672,https://admin:secret@rabbit-2/", c.AMQP.ManagementURL)
	_, err = rabbitadmin.New(c.AMQP.ManagementURL, c.AMQP.VHost)
	require.NoError(t, err, "rabbitadmin takes the list as it is")

	_, err = config.LoadReconcile(env(map[string]string{"RABBITMQ_MANAGEMENT_URL": "http://rabbit-1:15672,rabbit-2"}))
	require.ErrorContains(t, err, `RABBITMQ_MANAGEMENT_URL="rabbit-2": not an absolute URL`)
}

func TestRabbitQueueType(t *testing.T) {
	t.Parallel()
	c, err := config.LoadRelay(env(nil))
	require.NoError(t, err)
	require.Equal(t, topology.QueueClassic, c.AMQP.Topology.QueueType)

	_, err = config.LoadRelay(env(map[string]string{"RABBITMQ_QUEUE_TYPE": "lazy"}))
	require.ErrorContains(t, err, `RABBITMQ_QUEUE_TYPE="lazy": want one of classic, quorum`)

	// The priority queue cannot become a quorum queue: start-up is refused, naming it.
	_, err = config.LoadRelay(env(map[string]string{"RABBITMQ_QUEUE_TYPE": "quorum"}))
	require.ErrorContains(t, err, "eisland.object.replication.process.queue: a quorum queue cannot keep its x-max-priority")

	c, err = config.LoadRelay(env(map[string]string{"RABBITMQ_QUEUE_TYPE": "Quorum", "RABBITMQ_CLASSIC_QUEUES": "eisland.object.replication.process.queue"}))
	require.NoError(t, err)
	tp, err := topology.New(c.AMQP.Topology)
	require.NoError(t, err)
	require.Equal(t, topology.QueueQuorum, tp.QueueType())

	_, err = config.LoadRelay(env(map[string]string{"RABBITMQ_QUEUE_TYPE": "quorum", "RABBITMQ_CLASSIC_QUEUES": "object.replication.process.queue"}))
	require.ErrorContains(t, err, `classic queue "object.replication.process.queue": no such queue`)
}
