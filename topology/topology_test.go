package topology_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// seedQueue is one row of the customer's RabbitMQ document's per-domain "Queue Topology" tables,
// copied here by hand so the test does not read the table it checks.
type seedQueue struct {
	name, exchange, key string
	args                map[string]any
}

func retryArgs(ttl int32, exchange, key string) map[string]any {
	return map[string]any{"x-message-ttl": ttl, "x-dead-letter-exchange": exchange, "x-dead-letter-routing-key": key}
}

// The 22 queues of the customer's RabbitMQ document's Queue Summary, in its order.
var seedQueues = []seedQueue{
	{"eisland.email.verify.dispatch.queue", "eisland.email.verify.exchange", "eisland.email.verify.dispatch", nil},
	{"eisland.email.verify.retry.queue", "eisland.email.verify.exchange", "eisland.email.verify.retry",
		retryArgs(10000, "eisland.email.verify.exchange", "eisland.email.verify.dispatch")},
	{"eisland.email.verify.dlq", "eisland.email.verify.exchange", "eisland.email.verify.dlq", nil},
	{"eisland.payment.notify.process.queue", "eisland.payment.notify.exchange", "eisland.payment.notify.process", nil},
	{"eisland.payment.notify.retry.queue", "eisland.payment.notify.exchange", "eisland.payment.notify.retry",
		retryArgs(15000, "eisland.payment.notify.exchange", "eisland.payment.notify.process")},
	{"eisland.payment.notify.dlq", "eisland.payment.notify.exchange", "eisland.payment.notify.dlq", nil},
	{"eisland.payment.receipt.dispatch.queue", "eisland.payment.notify.exchange", "eisland.payment.receipt.dispatch", nil},
	{"eisland.payment.receipt.retry.queue", "eisland.payment.notify.exchange", "eisland.payment.receipt.retry",
		retryArgs(15000, "eisland.payment.notify.exchange", "eisland.payment.receipt.dispatch")},
	{"eisland.payment.receipt.dlq", "eisland.payment.notify.exchange", "eisland.payment.receipt.dlq", nil},
	{"eisland.agent.billing.deduct.queue", "eisland.agent.billing.exchange", "eisland.agent.billing.deduct", nil},
	{"eisland.agent.billing.deduct.retry.queue", "eisland.agent.billing.exchange", "eisland.agent.billing.deduct.retry",
		retryArgs(5000, "eisland.agent.billing.exchange", "eisland.agent.billing.deduct")},
	{"eisland.agent.billing.deduct.dlq", "eisland.agent.billing.exchange", "eisland.agent.billing.deduct.dlq", nil},
	{"eisland.agent.usage-stats.queue", "eisland.agent.billing.exchange", "eisland.agent.usage-stats", nil},
	{"eisland.object.replication.process.queue", "eisland.object.replication.exchange", "eisland.object.replication.process",
		map[string]any{"x-max-priority": int32(10)}},
	{"eisland.object.replication.retry.queue", "eisland.object.replication.exchange", "eisland.object.replication.retry",
		retryArgs(15000, "eisland.object.replication.exchange", "eisland.object.replication.process")},
	{"eisland.object.replication.dlq", "eisland.object.replication.exchange", "eisland.object.replication.dlq", nil},
	{"eisland.identity.material.upload.queue", "eisland.identity.material.exchange", "eisland.identity.material.upload", nil},
	{"eisland.identity.material.upload.retry.queue", "eisland.identity.material.exchange", "eisland.identity.material.upload.retry",
		retryArgs(10000, "eisland.identity.material.exchange", "eisland.identity.material.upload")},
	{"eisland.identity.material.upload.dlq", "eisland.identity.material.exchange", "eisland.identity.material.upload.dlq", nil},
	{"eisland.mini-game.score.upsert.queue", "eisland.mini-game.exchange", "eisland.mini-game.score.upsert", nil},
	{"eisland.mini-game.score.upsert.retry.queue", "eisland.mini-game.exchange", "eisland.mini-game.score.upsert.retry",
		retryArgs(15000, "eisland.mini-game.exchange", "eisland.mini-game.score.upsert")},
	{"eisland.mini-game.score.upsert.dlq", "eisland.mini-game.exchange", "eisland.mini-game.score.upsert.dlq", nil},
}

// the customer's RabbitMQ document "Retry Configuration Summary".
var seedRetry = map[string]struct {
	max    int
	delay  time.Duration
	header string
}{
	topology.DomainEmail:             {3, 10 * time.Second, "x-email-retry-count"},
	topology.DomainIdentityMaterial:  {3, 10 * time.Second, "x-identity-material-retry-count"},
	topology.DomainObjectReplication: {6, 15 * time.Second, "x-object-replication-retry-count"},
	topology.DomainPaymentNotify:     {5, 15 * time.Second, "x-payment-retry-count"},
	topology.DomainPaymentReceipt:    {5, 15 * time.Second, "x-payment-receipt-retry-count"},
	topology.DomainAgentBilling:      {5, 5 * time.Second, "x-agent-billing-retry-count"},
	topology.DomainMiniGameScore:     {5, 15 * time.Second, "x-mini-game-score-retry-count"},
}

func seedTopology(t *testing.T) *topology.Topology {
	t.Helper()
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	return tp
}

func TestExchangesAreTheSeeds(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{
		"eisland.email.verify.exchange",
		"eisland.payment.notify.exchange",
		"eisland.agent.billing.exchange",
		"eisland.object.replication.exchange",
		"eisland.identity.material.exchange",
		"eisland.mini-game.exchange",
	}, seedTopology(t).Exchanges())
}

func TestQueuesAreTheSeeds(t *testing.T) {
	t.Parallel()
	qs := seedTopology(t).Queues()
	require.Len(t, qs, 22)
	for i, want := range seedQueues {
		got := qs[i]
		require.Equal(t, want.name, got.Name, "queue %d", i+1)
		require.Equal(t, want.exchange, got.Exchange, want.name)
		require.Equal(t, want.key, got.RoutingKey, want.name)
		if want.args == nil {
			require.Empty(t, got.Args, want.name)
		} else {
			// Same values and the int32 type a Spring producer declares.
			require.Equal(t, want.args, got.Args, want.name)
		}
	}
}

func TestRetryPoliciesAreTheSeeds(t *testing.T) {
	t.Parallel()
	tp := seedTopology(t)
	for _, d := range tp.Domains() {
		want, retried := seedRetry[d.Name]
		if !retried {
			require.Equal(t, topology.DomainAgentUsageStats, d.Name)
			require.False(t, d.HasRetry(), "usage stats is fire-and-forget")
			require.Empty(t, d.DLQ)
			continue
		}
		require.True(t, d.HasRetry(), d.Name)
		require.Equal(t, want.max, d.Retry.MaxRetries, d.Name)
		require.Equal(t, want.delay, d.Retry.Delay, d.Name)
		require.Equal(t, want.header, d.RetryHeader, d.Name)
	}
	require.Len(t, tp.Domains(), 8)
}

func TestDLQTablesAreTheSeeds(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		topology.DomainEmail:             "email_dispatch_dlq_log",
		topology.DomainPaymentNotify:     "payment_dlq_log",
		topology.DomainPaymentReceipt:    "payment_dlq_log",
		topology.DomainAgentBilling:      "agent_billing_dlq_log",
		topology.DomainObjectReplication: "object_replication_log",
		topology.DomainMiniGameScore:     "mini_game_score_dlq_log",
		topology.DomainIdentityMaterial:  "identity_material_dlq_log", // Isle's: the Spring backend only logs
		topology.DomainAgentUsageStats:   "",
	}
	for _, d := range seedTopology(t).Domains() {
		require.Equal(t, want[d.Name], d.DLQTable, d.Name)
	}
}

func TestMessageRecordsAndTypeIDs(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{
		TypeIDPackage: "cn.example.mq",
		TypeIDs:       map[string]string{"ScoreUpsertMessage": "cn.game.ScoreUpsertMessage"},
	})
	require.NoError(t, err)
	records := map[string]string{}
	for _, d := range tp.Domains() {
		records[d.Message] = d.TypeID
	}
	require.Equal(t, map[string]string{
		"EmailCodeDispatchMessage":      "cn.example.mq.EmailCodeDispatchMessage",
		"PaymentNotifyMessage":          "cn.example.mq.PaymentNotifyMessage",
		"PaymentReceiptDispatchMessage": "cn.example.mq.PaymentReceiptDispatchMessage",
		"AgentBillingDeductMessage":     "cn.example.mq.AgentBillingDeductMessage",
		"AgentUsageStatsMessage":        "cn.example.mq.AgentUsageStatsMessage",
		"ObjectReplicationMessage":      "cn.example.mq.ObjectReplicationMessage",
		"IdentityMaterialMessage":       "cn.example.mq.IdentityMaterialMessage",
		"ScoreUpsertMessage":            "cn.game.ScoreUpsertMessage",
	}, records)
}

func TestPrefixChangesOnlyTheFirstSegment(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{Prefix: "t42"})
	require.NoError(t, err)
	for i, q := range tp.Queues() {
		want := seedQueues[i]
		require.Equal(t, "t42"+strings.TrimPrefix(want.name, "eisland"), q.Name)
		require.Equal(t, "t42"+strings.TrimPrefix(want.key, "eisland"), q.RoutingKey)
		if dlx, ok := q.Args["x-dead-letter-exchange"]; ok {
			require.Equal(t, "t42"+strings.TrimPrefix(want.args["x-dead-letter-exchange"].(string), "eisland"), dlx)
		}
	}
	d, ok := tp.DomainByQueue("t42.payment.receipt.dlq")
	require.True(t, ok)
	require.Equal(t, topology.DomainPaymentReceipt, d.Name)
}

func TestOverridesAndInvalidConfig(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{Retry: map[string]topology.RetryPolicy{
		topology.DomainEmail: {MaxRetries: 0, Delay: 200 * time.Millisecond},
	}})
	require.NoError(t, err)
	d, _ := tp.Domain(topology.DomainEmail)
	require.Equal(t, topology.RetryPolicy{MaxRetries: 0, Delay: 200 * time.Millisecond}, d.Retry)
	require.Equal(t, int32(200), tp.Queues()[1].Args["x-message-ttl"])

	_, err = topology.New(topology.Config{
		Prefix: "bad prefix",
		Retry: map[string]topology.RetryPolicy{
			topology.DomainAgentUsageStats: {MaxRetries: 1, Delay: time.Second},
			topology.DomainAgentBilling:    {MaxRetries: -1, Delay: 0},
		},
		TypeIDs: map[string]string{"NoSuchMessage": "x.Y"},
	})
	require.Error(t, err)
	for _, want := range []string{`prefix "bad prefix"`, `"agent-usage-stats"`, "max retries -1", "retry delay 0s", `"NoSuchMessage"`} {
		require.Contains(t, err.Error(), want)
	}
}

// Each domain's facts are stated once, here: the body field its dead
// messages are indexed by is a field of its record, and every domain with
// a retry policy names the variables that set it.
func TestDomainFactsAreComplete(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	fields := map[string][]string{}
	for _, m := range allMessages() {
		rt := reflect.Indirect(reflect.ValueOf(m)).Type()
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields[m.Record()] = append(fields[m.Record()], name)
		}
	}
	for _, d := range tp.Domains() {
		if !d.HasRetry() {
			require.Empty(t, d.EnvPrefix+d.DLQSubject+d.DLQTable, d.Name)
			continue
		}
		require.Regexp(t, `^[A-Z][A-Z_]+[A-Z]$`, d.EnvPrefix, d.Name)
		require.NotEmpty(t, d.DLQTable, d.Name)
		require.Contains(t, fields[d.Message], d.DLQSubject, "%s: dead messages indexed by a field its record lacks", d.Name)
	}
}
