package handlers

import (
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Deps are what the consumers are built from; the worker makes them once.
// A consumer builds the store aggregates it needs from DB and Redis; the
// group-committing writers are shared by every handler of the process.
type Deps struct {
	DB     *gorm.DB
	Redis  *store.Redis
	Ledger Ledger       // store.LedgerWriter
	Usage  UsageCounter // store.UsageWriter
	// Settler settles deductions in Redis (store.SettleWriter, sharing
	// pipelines); nil settles each call on its own (store.Balances).
	Settler BalanceSettler
	// UsageHashes counts usages in Redis (store.UsageHashWriter, sharing
	// pipelines); nil counts each call on its own (store.UsageStats).
	UsageHashes UsageHashes
	Log         *slog.Logger // each consumer logs with handler=<its name>

	Topology    *topology.Topology // set by Routes
	Stores      Stores             // the object stores
	Mailer      mail.Mailer        // verification codes and receipts
	CopyTimeout time.Duration      // one replication copy's limit; 0 = none
	// Payments verifies the gateway callback in the rawBody of a paid
	// notification without its amount (paynotify.Gateways); nil: nothing
	// does, and such a notification is refused.
	Payments PaymentProofs
}

// A Consumer builds the handler of one domain's main queue: the worker
// runs it as a handler of its watermill Router, one message per call, many
// at once, behind the domain's middleware (messaging.MainChain: retry
// copies, DLQ, recovery, timeout, metrics). One that groups its writes
// says Batches: its calls meet in the group-committing writers of Deps
// (one transaction, one Redis pipeline for the many in flight), and the
// worker gives its queue a deeper prefetch so that many are.
//
// A stopping worker hands out what every queue's channels hold rather than
// give it back (cmd/worker, messaging.SubscriberConfig.FinishHeld): the
// consumers that key a message without an id by its delivery (Delivery.Key:
// agent-billing, agent-usage-stats) must take a delivery that comes again
// flagged as redelivered for one they may have applied (doc/money.md,
// "Messages without ids").
type Consumer struct {
	Domain  string
	New     func(d Deps, log *slog.Logger) messaging.HandlerFunc
	Batches bool
}

// Consumers is every main-queue consumer Isle runs: a new one is a file in
// this package and one line here.
var Consumers = []Consumer{
	{Domain: topology.DomainAgentBilling, New: billingDeductConsumer, Batches: true},
	{Domain: topology.DomainAgentUsageStats, New: usageStatsConsumer, Batches: true},
	{Domain: topology.DomainObjectReplication, New: objectReplicationConsumer},
	{Domain: topology.DomainIdentityMaterial, New: identityMaterialConsumer},
	{Domain: topology.DomainEmail, New: emailCodeConsumer},
	{Domain: topology.DomainPaymentNotify, New: paymentNotifyConsumer},
	{Domain: topology.DomainPaymentReceipt, New: paymentReceiptConsumer},
	{Domain: topology.DomainMiniGameScore, New: scoreUpsertConsumer},
}

// NotConsumed are the domains whose main queue Isle does not consume, and
// why: a domain of the contract is in Consumers or here, never in neither.
var NotConsumed = map[string]string{}

// A Route is a consumer ready to run: what the worker's -handlers names
// ("<domain>" for a main queue, "<domain>-dlq" for a dead-letter queue).
type Route struct {
	Name    string
	Domain  topology.Domain
	DLQ     bool // the domain's dead-letter queue, which stores dead messages
	Batches bool // its writes are group-committed (Consumer.Batches)
	Handle  messaging.HandlerFunc
}

// Routes builds every consumer of tp: the main consumer of each domain in
// Consumers, and the dead-letter consumer of each domain with a DLQ.
func Routes(tp *topology.Topology, d Deps) []Route {
	d.Topology = tp
	var out []Route
	for _, c := range Consumers {
		dom, ok := tp.Domain(c.Domain)
		if !ok {
			panic("handlers: Consumers names a domain the topology lacks: " + c.Domain) // a wiring bug stops start-up
		}
		out = append(out, Route{Name: c.Domain, Domain: dom, Batches: c.Batches, Handle: c.New(d, d.Log.With("handler", c.Domain))})
	}
	for _, dom := range tp.Domains() {
		if dom.HasRetry() {
			name := dom.Name + "-dlq"
			out = append(out, Route{Name: name, Domain: dom, DLQ: true, Handle: NewDeadLetters(d.DB, dom, d.Log.With("handler", name)).Handle})
		}
	}
	return out
}

// domain is the topology's domain named name; a consumer asks only for
// domains of the contract, so a missing one is a wiring bug.
func (d Deps) domain(name string) topology.Domain {
	dom, ok := d.Topology.Domain(name)
	if !ok {
		panic("handlers: the topology lacks domain " + name)
	}
	return dom
}
