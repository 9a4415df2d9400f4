package handlers

import (
	"context"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Backends are what the consumers are built from; the worker makes them once.
// A consumer builds the store aggregates it needs from DB and Redis; the
// group-committing writers are shared by every handler of the process.
type Backends struct {
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
	Buckets     Buckets            // the object stores
	Mailer      mail.Mailer        // verification codes and receipts
	CopyTimeout time.Duration      // one replication copy's limit; 0 = none
	// Payments verifies the gateway callback in the rawBody of a paid
	// notification without its amount (paynotify.Gateways); nil: nothing
	// does, and such a notification is refused.
	Payments PaymentProofs
}

// A Consumer is the consumer of one domain's main queue, as Consume
// registers it: the worker runs it as a handler of its Watermill Router,
// one message per call, many at once, behind the domain's middleware
// (messaging.MainChain: retry copies, DLQ, recovery, timeout, metrics).
type Consumer struct {
	Domain string // the domain its message type travels on (topology.Message.Domain)
	build  func(d Backends, log *slog.Logger) (messaging.HandlerFunc, Options)
}

// Options are what a consumer asks of the worker beyond being run. A
// consumer has the defaults, the zero Options, unless its type declares
// Options() Options and overrides what it needs.
type Options struct {
	// GroupCommits: its calls meet in the group-committing writers of Backends
	// (one transaction, one Redis pipeline for the many in flight), and the
	// worker gives its queue a prefetch of a whole batch so that many are.
	GroupCommits bool
}

// Consume registers the consumer that build makes, of messages T: T's
// domain (topology.Message.Domain) is the queue it consumes, and the
// consumer's Options, if its type declares them, are how it is run.
func Consume[T any, PT interface {
	*T
	topology.Message
}, H interface {
	Handle(ctx context.Context, m T) error
}](build func(d Backends, log *slog.Logger) H) Consumer {
	var m T
	return Consumer{Domain: PT(&m).Domain(), build: func(d Backends, log *slog.Logger) (messaging.HandlerFunc, Options) {
		h := build(d, log)
		var o Options
		if declared, ok := any(h).(interface{ Options() Options }); ok {
			o = declared.Options()
		}
		return messaging.Typed[T, PT](h.Handle), o
	}}
}

// New builds the consumer's handler.
func (c Consumer) New(d Backends, log *slog.Logger) messaging.HandlerFunc {
	h, _ := c.build(d, log)
	return h
}

// Consumers is every main-queue consumer Isle runs: a new one is a file in
// this package and one line here.
var Consumers = []Consumer{
	Consume[topology.AgentBillingDeduct](billingDeductConsumer),
	Consume[topology.AgentUsageStats](usageStatsConsumer),
	Consume[topology.ObjectReplication](objectReplicationConsumer),
	Consume[topology.IdentityMaterial](identityMaterialConsumer),
	Consume[topology.EmailCodeDispatch](emailCodeConsumer),
	Consume[topology.PaymentNotify](paymentNotifyConsumer),
	Consume[topology.PaymentReceiptDispatch](paymentReceiptConsumer),
	Consume[topology.ScoreUpsert](scoreUpsertConsumer),
}

// NotConsumed are the domains whose main queue Isle does not consume, and
// why: a domain of the contract is in Consumers or here, never in neither.
var NotConsumed = map[string]string{}

// A Route is a consumer ready to run: what the worker's -handlers names
// ("<domain>" for a main queue, "<domain>-dlq" for a dead-letter queue).
type Route struct {
	Name   string
	Domain topology.Domain
	DLQ    bool // the domain's dead-letter queue, which stores dead messages
	Handle messaging.HandlerFunc
	Options
}

// Routes builds every consumer of tp: the main consumer of each domain in
// Consumers, and the dead-letter consumer of each domain with a DLQ.
func Routes(tp *topology.Topology, d Backends) []Route {
	d.Topology = tp
	var out []Route
	for _, c := range Consumers {
		dom, ok := tp.Domain(c.Domain)
		if !ok {
			panic("handlers: Consumers names a domain the topology lacks: " + c.Domain) // a wiring bug stops start-up
		}
		h, o := c.build(d, d.Log.With("handler", c.Domain))
		out = append(out, Route{Name: c.Domain, Domain: dom, Handle: h, Options: o})
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
func (d Backends) domain(name string) topology.Domain {
	dom, ok := d.Topology.Domain(name)
	if !ok {
		panic("handlers: the topology lacks domain " + name)
	}
	return dom
}
