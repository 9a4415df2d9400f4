package topology

import (
	"slices"
	"time"
)

// DefaultPrefix is the first segment of every exchange, queue and routing key.
const DefaultPrefix = "eisland"

// MaxPriority is the x-max-priority of the object replication queue.
const MaxPriority = 10

// Domain names, as used by `worker -handlers`, configuration and metrics.
const (
	DomainEmail             = "email"
	DomainPaymentNotify     = "payment-notify"
	DomainPaymentReceipt    = "payment-receipt"
	DomainAgentBilling      = "agent-billing"
	DomainAgentUsageStats   = "agent-usage-stats"
	DomainObjectReplication = "object-replication"
	DomainIdentityMaterial  = "identity-material"
	DomainMiniGameScore     = "mini-game-score"
)

// spec is one row of the Spring backend's tables, with names still unprefixed.
// Queue names end in ".queue" except the DLQs, exactly as the Spring backend spells them.
type spec struct {
	name        string
	exchange    string // exchange name after the prefix
	queue       string // main queue after the prefix
	routingKey  string // main routing key after the prefix
	retryQueue  string // "" when the domain has no retry (usage stats)
	retryKey    string
	dlq         string // "" when the domain has no DLQ (usage stats)
	dlqKey      string
	retryDelay  time.Duration
	maxRetries  int
	retryHeader string
	maxPriority int
	dlqTable    string  // MySQL table the DLQ consumer writes
	dlqSubject  string  // the body field a dead message is indexed by in that table
	envPrefix   string  // configuration variables of the retry policy: <envPrefix>_MAX_RETRIES, ...
	record      Message // the domain's message type; its Record() is the Java record name
}

// table is the wire contract: each domain's queues and retry policy, in
// the order the Spring backend's documents list them (doc/contract.md).
var table = []spec{
	{
		name: DomainEmail, exchange: "email.verify.exchange",
		queue: "email.verify.dispatch.queue", routingKey: "email.verify.dispatch",
		retryQueue: "email.verify.retry.queue", retryKey: "email.verify.retry",
		dlq: "email.verify.dlq", dlqKey: "email.verify.dlq",
		retryDelay: 10 * time.Second, maxRetries: 3, retryHeader: "x-email-retry-count",
		dlqTable: "email_dispatch_dlq_log", dlqSubject: "email", envPrefix: "EMAIL_NOTIFY", record: EmailCodeDispatch{},
	},
	{
		name: DomainPaymentNotify, exchange: "payment.notify.exchange",
		queue: "payment.notify.process.queue", routingKey: "payment.notify.process",
		retryQueue: "payment.notify.retry.queue", retryKey: "payment.notify.retry",
		dlq: "payment.notify.dlq", dlqKey: "payment.notify.dlq",
		retryDelay: 15 * time.Second, maxRetries: 5, retryHeader: "x-payment-retry-count",
		dlqTable: "payment_dlq_log", dlqSubject: "outTradeNo", envPrefix: "PAYMENT_NOTIFY", record: PaymentNotify{},
	},
	{
		name: DomainPaymentReceipt, exchange: "payment.notify.exchange",
		queue: "payment.receipt.dispatch.queue", routingKey: "payment.receipt.dispatch",
		retryQueue: "payment.receipt.retry.queue", retryKey: "payment.receipt.retry",
		dlq: "payment.receipt.dlq", dlqKey: "payment.receipt.dlq",
		retryDelay: 15 * time.Second, maxRetries: 5, retryHeader: "x-payment-receipt-retry-count",
		dlqTable: "payment_dlq_log", dlqSubject: "outTradeNo", envPrefix: "PAYMENT_NOTIFY", record: PaymentReceiptDispatch{},
	},
	{
		name: DomainAgentBilling, exchange: "agent.billing.exchange",
		queue: "agent.billing.deduct.queue", routingKey: "agent.billing.deduct",
		retryQueue: "agent.billing.deduct.retry.queue", retryKey: "agent.billing.deduct.retry",
		dlq: "agent.billing.deduct.dlq", dlqKey: "agent.billing.deduct.dlq",
		retryDelay: 5 * time.Second, maxRetries: 5, retryHeader: "x-agent-billing-retry-count",
		dlqTable: "agent_billing_dlq_log", dlqSubject: "username", envPrefix: "AGENT_BILLING", record: AgentBillingDeduct{},
	},
	{
		name: DomainAgentUsageStats, exchange: "agent.billing.exchange",
		queue: "agent.usage-stats.queue", routingKey: "agent.usage-stats",
		record: AgentUsageStats{},
	},
	{
		name: DomainObjectReplication, exchange: "object.replication.exchange",
		queue: "object.replication.process.queue", routingKey: "object.replication.process",
		retryQueue: "object.replication.retry.queue", retryKey: "object.replication.retry",
		dlq: "object.replication.dlq", dlqKey: "object.replication.dlq",
		retryDelay: 15 * time.Second, maxRetries: 6, retryHeader: "x-object-replication-retry-count",
		maxPriority: MaxPriority,
		dlqTable:    "object_replication_log", dlqSubject: "taskId", envPrefix: "OBJECT_REPLICATION", record: ObjectReplication{},
	},
	{
		name: DomainIdentityMaterial, exchange: "identity.material.exchange",
		queue: "identity.material.upload.queue", routingKey: "identity.material.upload",
		retryQueue: "identity.material.upload.retry.queue", retryKey: "identity.material.upload.retry",
		dlq: "identity.material.upload.dlq", dlqKey: "identity.material.upload.dlq",
		retryDelay: 10 * time.Second, maxRetries: 3, retryHeader: "x-identity-material-retry-count",
		dlqTable: "identity_material_dlq_log", dlqSubject: "certifyId", envPrefix: "IDENTITY_MATERIAL", record: IdentityMaterial{},
	},
	{
		name: DomainMiniGameScore, exchange: "mini-game.exchange",
		queue: "mini-game.score.upsert.queue", routingKey: "mini-game.score.upsert",
		retryQueue: "mini-game.score.upsert.retry.queue", retryKey: "mini-game.score.upsert.retry",
		dlq: "mini-game.score.upsert.dlq", dlqKey: "mini-game.score.upsert.dlq",
		retryDelay: 15 * time.Second, maxRetries: 5, retryHeader: "x-mini-game-score-retry-count",
		dlqTable: "mini_game_score_dlq_log", dlqSubject: "submitId", envPrefix: "MINI_GAME_SCORE", record: ScoreUpsert{},
	},
}

// Records returns a zero value of every domain's record, in the table's
// order.
func Records() []Message {
	out := make([]Message, len(table))
	for i, s := range table {
		out[i] = s.record
	}
	return out
}

// exchanges lists the exchanges of the table, unprefixed, in order of first
// appearance: that is the Spring documents' exchange order, since they
// introduces each exchange with the first domain that uses it.
func exchanges() []string {
	var out []string
	for _, s := range table {
		if !slices.Contains(out, s.exchange) {
			out = append(out, s.exchange)
		}
	}
	return out
}

// DomainNames lists every domain in table order.
func DomainNames() []string {
	names := make([]string, len(table))
	for i, s := range table {
		names[i] = s.name
	}
	return names
}

// SeedRetry returns the default retry policy of a domain; ok is false for an
// unknown domain or one without retries (usage stats).
func SeedRetry(domain string) (p RetryPolicy, ok bool) {
	for _, s := range table {
		if s.name == domain && s.retryQueue != "" {
			return RetryPolicy{MaxRetries: s.maxRetries, Delay: s.retryDelay}, true
		}
	}
	return RetryPolicy{}, false
}
