package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// Ledger applies debits to MySQL exactly once and records entries whose
// Redis side is done (store.LedgerWriter, group-committed): each debit gets
// its result, or the error of the transaction it was in.
type Ledger interface {
	ApplyDebits(ctx context.Context, ds []store.Debit) ([]store.DebitResult, []error)
	MarkSettled(ctx context.Context, entries ...store.EntryKey) error
}

// BalanceSettler reflects committed ledger entries in the Redis balance
// (Settle; store.SettleWriter shares one pipeline among concurrent calls),
// and deals with a pending record met again by an entry settled before
// (Resettle: cleared when it is the entry's own, refunded when it is a
// second charge of the id).
type BalanceSettler interface {
	Settle(ctx context.Context, entries ...store.SettleEntry) ([]store.SettleResult, error)
	Resettle(ctx context.Context, e store.SettleEntry) (store.ResettleResult, error)
}

// Deductor persists a Redis-side deduction to MySQL exactly once
// (doc/money.md): the ledger row keyed by the deduction id and the balance
// decrement commit together; then the deduction's pending entry is removed
// (or, after a Redis loss took it, the balance is settled).
type Deductor struct {
	ledger  Ledger
	balance BalanceSettler
	log     *slog.Logger
	now     func() time.Time
}

// NewDeductor returns the agent-billing consumer.
func NewDeductor(l Ledger, b BalanceSettler, log *slog.Logger) *Deductor {
	if l == nil || b == nil || log == nil {
		panic("handlers: NewDeductor: nil dependency") // a wiring bug stops start-up
	}
	return &Deductor{ledger: l, balance: b, log: log, now: time.Now}
}

// billingDeductConsumer is the agent-billing consumer of the registry.
func billingDeductConsumer(d Deps, log *slog.Logger) messaging.HandlerFunc {
	settler := d.Settler
	if settler == nil {
		settler = store.NewBalances(d.DB, d.Redis)
	}
	return messaging.Typed(NewDeductor(d.Ledger, settler, log).Handle)
}

// Handle applies one deduction (HandleBatch of one); the delivery, for its
// message id, comes from ctx.
func (h *Deductor) Handle(ctx context.Context, m topology.AgentBillingDeduct) error {
	d, _ := messaging.DeliveryFrom(ctx)
	return h.HandleBatch(ctx, []DeductItem{{Delivery: d, Msg: m}})[0]
}

// DeductItem is one deduction of a HandleBatch: its record, and the
// delivery that brought it (its key, its Redelivered flag).
type DeductItem struct {
	Delivery messaging.Delivery
	Msg      topology.AgentBillingDeduct
}

// deduction is one item of a batch on its way through HandleBatch.
type deduction struct {
	at       int // its index in the batch
	ctx      context.Context
	id       string
	fromIsle bool
	entry    store.SettleEntry
}

// HandleBatch applies a batch of deductions together: their ledger rows in
// one transaction, their Redis side in one pipeline, their settled marks in
// one update, each shared with other calls in flight. Each item gets its
// own answer: a failure of one never fails the others.
func (h *Deductor) HandleBatch(ctx context.Context, items []DeductItem) []error {
	errs := make([]error, len(items))
	var todo []deduction
	var debits []store.Debit
	now := h.now()
	for i, it := range items {
		m := it.Msg
		amount, err := m.Amount()
		if err != nil {
			errs[i] = messaging.Permanent(err)
			continue
		}
		dd := deduction{at: i, ctx: messaging.WithDelivery(ctx, it.Delivery), id: m.DeductionID, fromIsle: m.DeductionID != ""}
		if store.IsForeignKey(m.DeductionID) {
			// Such an id could name a foreign message's row (doc/money.md).
			errs[i] = messaging.Permanent(fmt.Errorf("deductionId %q: ids beginning %s are the keys of messages without one",
				m.DeductionID, strings.Join(store.ForeignKeyPrefixes, " or ")))
			continue
		}
		var sameBody string
		if !dd.fromIsle {
			// A producer without deduction ids (the Java backend): keyed by
			// its message id, or, for a message without one, by the id the
			// retry middleware gave this delivery (doc/money.md, "Messages
			// without ids").
			dd.id = store.ForeignKey(it.Delivery.Key(), ledgerIDMax)
			if it.Delivery.Redelivered && it.Delivery.SameBody() != "" {
				sameBody = store.ForeignKey(it.Delivery.SameBody(), ledgerIDMax)
			}
		}
		todo = append(todo, dd)
		debits = append(debits, store.Debit{
			Username: m.Username, ID: dd.id, Amount: amount, ModelName: m.ModelName,
			InputTokens: int64(m.InputTokens), OutputTokens: int64(m.OutputTokens), OccurredAt: now, Source: "consumer",
			SelfSettled: !dd.fromIsle, // the producer's own script keeps its Redis balance
			Ref:         m.PendingRef, RequestHash: m.RequestHash, SameBody: sameBody,
		})
	}
	if len(todo) == 0 {
		return errs
	}
	results, applyErrs := h.ledger.ApplyDebits(ctx, debits)
	var settle []deduction
	settling := map[store.EntryKey]bool{} // a deduction twice in a batch is settled once
	for j, dd := range todo {
		m, res := items[dd.at].Msg, results[j]
		switch {
		case applyErrs[j] != nil:
			errs[dd.at] = fmt.Errorf("apply deduction %s of %s: %w", dd.id, m.Username, applyErrs[j]) // retried
			continue
		case res.Err != nil:
			errs[dd.at] = messaging.Permanent(fmt.Errorf("deduction %s: %w", dd.id, res.Err))
			continue
		}
		if res.Shortfall.IsPositive() {
			h.log.WarnContext(dd.ctx, "deduction larger than the MySQL balance", "user", m.Username, "deduction", dd.id, "shortfall", res.Shortfall)
		}
		dd.entry = store.SettleEntry{Username: m.Username, Kind: store.SettleDeduction, EntryID: dd.id,
			Amount: res.Amount, Seq: res.Seq, Deducted: res.Amount.Add(res.Shortfall), Ref: res.Ref, RequestHash: res.RequestHash}
		if res.Settled {
			// Applied and settled before (a redelivery, the reconciler, or a
			// second charge of the id): a pending record of the id may be left.
			if dd.fromIsle {
				h.resettle(dd.ctx, dd.entry)
			}
			continue
		}
		// Applied now, or applied before by a process that died before the
		// Redis side: settle it (idempotent), then record that in MySQL. A
		// failure is retried; the ledger row stays as it is.
		if !settling[dd.entry.Key()] {
			settling[dd.entry.Key()] = true
			settle = append(settle, dd)
		}
	}
	if len(settle) == 0 {
		return errs
	}
	entries := make([]store.SettleEntry, len(settle))
	for k, dd := range settle {
		entries[k] = dd.entry
	}
	settled, err := h.balance.Settle(ctx, entries...)
	var marked []deduction
	for k, dd := range settle {
		e := err
		if e == nil {
			e = settled[k].Err
		}
		if e != nil {
			errs[dd.at] = fmt.Errorf("deduction %s is in MySQL, settling Redis: %w", dd.id, e)
			continue
		}
		h.warnSettled(dd, settled[k])
		marked = append(marked, dd)
	}
	keys := make([]store.EntryKey, len(marked))
	for k, dd := range marked {
		keys[k] = dd.entry.Key()
	}
	if err := h.ledger.MarkSettled(ctx, keys...); err != nil {
		for _, dd := range marked {
			errs[dd.at] = fmt.Errorf("deduction %s settled, recording it: %w", dd.id, err)
		}
	}
	return errs
}

// warnSettled logs what settling a deduction found out of the ordinary.
func (h *Deductor) warnSettled(dd deduction, r store.SettleResult) {
	e := dd.entry
	if r.Outcome == store.SettleRefunded {
		h.log.WarnContext(dd.ctx, "request id charged again after Redis forgot it; the second charge is refunded",
			"user", e.Username, "deduction", dd.id, "refunded", r.Refunded)
	}
	if r.Uncovered.IsPositive() {
		h.log.WarnContext(dd.ctx, "deduction landed after a Redis loss on a balance already spent; the part it could not take is forgiven (balance-sync records an ADJUST)",
			"user", e.Username, "deduction", dd.id, "uncovered", r.Uncovered)
	}
}

// resettle clears or refunds a pending record of an entry settled before.
// A failure is left to balance-sync, which finds the record when it is old.
func (h *Deductor) resettle(ctx context.Context, e store.SettleEntry) {
	out, err := h.balance.Resettle(ctx, e)
	switch {
	case err != nil:
		h.log.WarnContext(ctx, "could not deal with a pending record of a settled deduction; balance-sync will", "deduction", e.EntryID, "err", err)
	case out.Outcome == store.ResettleRefunded:
		h.log.WarnContext(ctx, "request id charged again after Redis forgot it; the second charge is refunded",
			"user", e.Username, "deduction", e.EntryID, "refunded", out.Refunded)
	}
}

// ledgerIDMax is the size of agent_ledger.entry_id.
const ledgerIDMax = 128
