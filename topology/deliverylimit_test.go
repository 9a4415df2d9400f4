package topology_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// quorumTopology is the quorum contract with the priority queue classic,
// the only way it declares on RabbitMQ 3.10.
func quorumTopology(t *testing.T, prefix string) *topology.Topology {
	t.Helper()
	tp, err := topology.New(topology.Config{Prefix: prefix, QueueType: topology.QueueQuorum, ClassicQueues: []string{replicationQueue(t, prefix)}})
	require.NoError(t, err)
	return tp
}

// deadLetterKeys is each main queue's DLQ routing key, from the customer's
// per-domain queue tables (copied by hand, as in topology_test.go). The
// usage-stats queue has no DLQ.
var deadLetterKeys = map[string][2]string{ // main queue: exchange, DLQ routing key
	"eisland.email.verify.dispatch.queue":    {"eisland.email.verify.exchange", "eisland.email.verify.dlq"},
	"eisland.payment.notify.process.queue":   {"eisland.payment.notify.exchange", "eisland.payment.notify.dlq"},
	"eisland.payment.receipt.dispatch.queue": {"eisland.payment.notify.exchange", "eisland.payment.receipt.dlq"},
	"eisland.agent.billing.deduct.queue":     {"eisland.agent.billing.exchange", "eisland.agent.billing.deduct.dlq"},
	"eisland.identity.material.upload.queue": {"eisland.identity.material.exchange", "eisland.identity.material.upload.dlq"},
	"eisland.mini-game.score.upsert.queue":   {"eisland.mini-game.exchange", "eisland.mini-game.score.upsert.dlq"},
}

// Under quorum every main queue declares its delivery limit and
// dead-letters past it to its domain's DLQ; a DLQ, with nowhere to go,
// declares the largest limit; a retry queue, never consumed, only its
// type. A queue kept classic, and every queue of the classic contract,
// keeps the contract's arguments exactly.
func TestQuorumQueuesDeclareTheirDeliveryLimit(t *testing.T) {
	t.Parallel()
	classic := seedTopology(t).Queues()
	quorum := quorumTopology(t, "").Queues()
	require.Len(t, quorum, len(classic))
	for i, q := range quorum {
		c := classic[i]
		require.Equal(t, c.Name, q.Name)
		require.NotContains(t, c.Args, "x-delivery-limit", "the classic contract is the Spring backend's")
		if q.Name == replicationQueue(t, "") {
			require.Equal(t, c.Args, q.Args, "a queue kept classic keeps its arguments")
			continue
		}
		want := maps.Clone(c.Args)
		if want == nil {
			want = map[string]any{}
		}
		want["x-queue-type"] = topology.QueueQuorum
		switch q.Role {
		case topology.RoleMain:
			want["x-delivery-limit"] = int32(topology.DeliveryLimit)
			if dl, ok := deadLetterKeys[q.Name]; ok {
				want["x-dead-letter-exchange"] = dl[0]
				want["x-dead-letter-routing-key"] = dl[1]
			} else {
				require.Equal(t, topology.DomainAgentUsageStats, q.Domain, "only usage stats has no DLQ")
			}
		case topology.RoleDLQ:
			want["x-delivery-limit"] = int32(topology.DLQDeliveryLimit)
		case topology.RoleRetry:
		}
		require.Equal(t, want, q.Args, q.Name)
	}

	// Each dead-letter target is the DLQ of the queue's own domain, bound
	// to its exchange by that key.
	bound := map[[2]string]topology.Queue{}
	for _, q := range quorum {
		bound[[2]string{q.Exchange, q.RoutingKey}] = q
	}
	for _, q := range quorum {
		if q.Role != topology.RoleMain || q.Args["x-dead-letter-exchange"] == nil {
			continue
		}
		dlq, ok := bound[[2]string{q.Args["x-dead-letter-exchange"].(string), q.Args["x-dead-letter-routing-key"].(string)}]
		require.True(t, ok, q.Name)
		require.Equal(t, topology.RoleDLQ, dlq.Role, q.Name)
		require.Equal(t, q.Domain, dlq.Domain, q.Name)
	}
}

// Verify accepts the quorum arguments as the management API reports them,
// and names each one a quorum queue declared without them lacks.
func TestCompareQuorumDeliveryLimit(t *testing.T) {
	t.Parallel()
	tp := quorumTopology(t, "")
	live := liveOf(tp)
	require.Empty(t, tp.Compare(live))

	// The main queue as a quorum queue was declared before the limit.
	live.Queues["eisland.email.verify.dispatch.queue"] = topology.LiveQueue{Durable: true, Args: map[string]any{"x-queue-type": "quorum"}}
	live.Queues["eisland.email.verify.dlq"] = topology.LiveQueue{Durable: true, Args: map[string]any{"x-queue-type": "quorum", "x-delivery-limit": float64(20)}}
	var got []string
	for _, d := range tp.Compare(live) {
		got = append(got, d.String())
	}
	require.Equal(t, []string{
		"different queue    eisland.email.verify.dispatch.queue: argument x-dead-letter-exchange missing, want eisland.email.verify.exchange; " +
			"argument x-dead-letter-routing-key missing, want eisland.email.verify.dlq; argument x-delivery-limit missing, want 50",
		"different queue    eisland.email.verify.dlq: argument x-delivery-limit=20, want 2147483647",
	}, got)
}

// On the broker, a message of a quorum main queue nacked with requeue
// DeliveryLimit times is dead-lettered to its domain's DLQ at the next
// requeue, whole, not dropped; the usage-stats message, whose domain has no
// DLQ, is dropped then (the next delivery is the message after it).
func TestQuorumDeliveryLimitDeadLettersToTheDLQ(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	conn, prefix := storetest.AMQP(t)
	tp := quorumTopology(t, prefix)
	require.NoError(t, tp.Declare(conn))

	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	publish := func(exchange, key, body string) {
		t.Helper()
		require.NoError(t, ch.PublishWithContext(t.Context(), exchange, key, true, false,
			amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent}))
		require.True(t, (<-confirms).Ack, "published %s", body)
	}
	consume := func(queue string) <-chan amqp.Delivery {
		t.Helper()
		c, err := conn.Channel()
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.Qos(1, 0, false))
		d, err := c.Consume(queue, "", false, false, false, false, nil)
		require.NoError(t, err)
		return d
	}
	next := func(from <-chan amqp.Delivery, what string) amqp.Delivery {
		t.Helper()
		select {
		case d, ok := <-from:
			require.True(t, ok, "%s: the consumer was closed", what)
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing delivered in 30 s", what)
			return amqp.Delivery{}
		}
	}
	// requeue takes body's deliveries from main and nacks each with
	// requeue, DeliveryLimit+1 times: the last one is past the limit.
	requeue := func(main <-chan amqp.Delivery, body string) {
		t.Helper()
		for i := range topology.DeliveryLimit + 1 {
			d := next(main, body)
			require.Equal(t, body, string(d.Body), "delivery %d", i+1)
			require.NoError(t, d.Nack(false, true))
		}
	}

	for _, d := range tp.Domains() {
		if d.Name == topology.DomainObjectReplication {
			continue // kept classic: a classic queue has no delivery limit
		}
		main := consume(d.Queue)
		body := "poison " + d.Name
		publish(d.Exchange, d.RoutingKey, body)
		requeue(main, body)
		if !d.HasRetry() {
			publish(d.Exchange, d.RoutingKey, "after "+d.Name)
			got := next(main, d.Name)
			require.Equal(t, "after "+d.Name, string(got.Body), "past the limit the usage-stats message is dropped: no DLQ")
			require.NoError(t, got.Ack(false))
			continue
		}
		var dead amqp.Delivery
		select { // the next delivery of the message is the DLQ's, not the main queue's
		case dead = <-consume(d.DLQ):
		case again := <-main:
			t.Fatalf("%s: %q delivered again after %d requeues, not dead-lettered (x-delivery-count %v)",
				d.Queue, again.Body, topology.DeliveryLimit+1, again.Headers["x-delivery-count"])
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing delivered in 30 s", d.DLQ)
		}
		require.Equal(t, body, string(dead.Body), "in %s", d.DLQ)
		require.Equal(t, "delivery_limit", dead.Headers["x-first-death-reason"], d.DLQ)
		require.Equal(t, d.Queue, dead.Headers["x-first-death-queue"], d.DLQ)
		require.NoError(t, dead.Ack(false))
		publish(d.Exchange, d.RoutingKey, "after "+d.Name)
		got := next(main, d.Name)
		require.Equal(t, "after "+d.Name, string(got.Body), "the dead-lettered message left the main queue")
		require.NoError(t, got.Ack(false))
	}
}

// A quorum queue declared before its delivery limit (by an older Isle)
// refuses the new declaration, PRECONDITION_FAILED, and verify names what
// it lacks; its policy from QuorumPolicies gives it the same limit and
// dead-letter target at once, without redeclaring; once drained and
// deleted, the declaration makes it anew. doc/contract.md, "Queue type",
// tells an operator these steps.
func TestQuorumQueueOfAnOlderDeclaration(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	conn, prefix := storetest.AMQP(t)
	tp := quorumTopology(t, prefix)
	email, _ := tp.Domain(topology.DomainEmail)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare(email.Queue, true, false, false, false, amqp.Table{"x-queue-type": topology.QueueQuorum})
	require.NoError(t, err)

	err = tp.Declare(conn)
	require.ErrorContains(t, err, "PRECONDITION_FAILED")
	require.ErrorContains(t, err, "for queue '"+email.Queue+"'")
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	compare := func() []topology.Difference {
		live, err := admin.Snapshot(context.Background())
		require.NoError(t, err)
		var diffs []topology.Difference
		for _, d := range tp.Compare(live) {
			if d.Severity != topology.Extra {
				diffs = append(diffs, d)
			}
		}
		return diffs
	}
	diffs := compare()
	require.Len(t, diffs, 1)
	require.Equal(t, email.Queue, diffs[0].Name)
	require.Contains(t, diffs[0].Detail, "argument x-delivery-limit missing, want 50")

	// The policy, as `rabbitmqctl set_policy --apply-to queues` sets it.
	var policy topology.Policy
	for _, p := range tp.QuorumPolicies() {
		if p.Queue == email.Queue {
			policy = p
		}
	}
	require.Equal(t, email.Queue, policy.Queue, "a policy for %s", email.Queue)
	setPolicy(t, policy)

	pc, err := conn.Channel()
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Confirm(false))
	confirms := pc.NotifyPublish(make(chan amqp.Confirmation, 1))
	require.NoError(t, pc.PublishWithContext(t.Context(), email.Exchange, email.RoutingKey, true, false, amqp.Publishing{Body: []byte("poison")}))
	require.True(t, (<-confirms).Ack)
	cc, err := conn.Channel()
	require.NoError(t, err)
	defer cc.Close()
	main, err := cc.Consume(email.Queue, "", false, false, false, false, nil)
	require.NoError(t, err)
	for range topology.DeliveryLimit + 1 {
		select {
		case d := <-main:
			require.NoError(t, d.Nack(false, true))
		case <-time.After(30 * time.Second):
			t.Fatal("nothing delivered in 30 s")
		}
	}
	dc, err := conn.Channel()
	require.NoError(t, err)
	defer dc.Close()
	dlq, err := dc.Consume(email.DLQ, "", false, false, false, false, nil)
	require.NoError(t, err)
	select {
	case d := <-dlq:
		require.Equal(t, "poison", string(d.Body))
		require.Equal(t, "delivery_limit", d.Headers["x-first-death-reason"])
		require.NoError(t, d.Ack(false))
	case d := <-main:
		t.Fatalf("%q delivered again past the policy's limit (x-delivery-count %v)", d.Body, d.Headers["x-delivery-count"])
	case <-time.After(30 * time.Second):
		t.Fatal("nothing in the DLQ in 30 s")
	}

	// Drained, deleted and declared anew, it has the arguments. (A quorum
	// queue refuses a delete "if empty": an operator checks it is.)
	require.NoError(t, cc.Close())
	_, err = ch.QueueDelete(email.Queue, false, false, false)
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	require.Empty(t, compare())
}

// setPolicy sets p on the test broker's "/" through the management API
// and waits until the queue reports it; the test's end deletes it.
func setPolicy(t *testing.T, p topology.Policy) {
	t.Helper()
	url := storetest.ManagementURL() + "/api/policies/%2F/" + p.Name
	body, err := json.Marshal(map[string]any{"pattern": p.Pattern, "definition": p.Definition, "apply-to": "queues"})
	require.NoError(t, err)
	do := func(method string, body []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Less(t, resp.StatusCode, 300, "%s %s", method, p.Name)
	}
	do(http.MethodPut, body)
	t.Cleanup(func() { do(http.MethodDelete, nil) })
	require.Eventually(t, func() bool {
		resp, err := http.Get(storetest.ManagementURL() + "/api/queues/%2F/" + p.Queue)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var q struct {
			Policy string `json:"policy"`
		}
		return json.NewDecoder(resp.Body).Decode(&q) == nil && q.Policy == p.Name
	}, 30*time.Second, 50*time.Millisecond, "the queue reports policy %s", p.Name)
}
