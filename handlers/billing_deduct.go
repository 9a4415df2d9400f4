package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// Ledger applies debits to MySQL exactly once and records entries whose
// Redis side is done (store.LedgerWriter, group-committed): each debit gets
// its result, or the error of the transaction it was in. A settled mark is
// written with a later transaction and not waited for: one never written
// leaves its entry to balance-sync, which settles it again.
type Ledger interface {
	ApplyDebits(ctx context.Context, ds []store.Debit) ([]store.DebitResult, []error)
	NoteSettled(entries ...store.EntryKey)
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
func billingDeductConsumer(d Backends, log *slog.Logger) *Deductor {
	settler := d.Settler
	if settler == nil {
		settler = store.NewBalances(d.DB, d.Redis)
	}
	return NewDeductor(d.Ledger, settler, log)
}

// Options says that its deductions meet in the ledger writer and the
// settle pipeline (Options.GroupCommits).
func (h *Deductor) Options() Options { return Options{GroupCommits: true} }

// Handle applies one deduction: its calls meet those of the other
// handlers in flight in the group-committing writers, which make the
// batches (one ledger transaction, one Redis pipeline for many). The
// delivery, for its message id, comes from ctx.
func (h *Deductor) Handle(ctx context.Context, m topology.AgentBillingDeduct) error {
	d, _ := messaging.DeliveryFrom(ctx)
	dd, debit, err := h.deduction(ctx, d, m, h.now())
	if err != nil {
		return err
	}
	results, applyErrs := h.ledger.ApplyDebits(ctx, []store.Debit{debit})
	settle, err := h.applied(&dd, m, results[0], applyErrs[0])
	if err != nil || !settle {
		return err
	}
	settled, err := h.balance.Settle(ctx, dd.entry)
	if err == nil {
		err = settled[0].Err
	}
	if err != nil {
		return fmt.Errorf("deduction %s is in MySQL, settling Redis: %w", dd.id, err)
	}
	h.warnSettled(dd, settled[0])
	h.ledger.NoteSettled(dd.entry.Key())
	return nil
}

// deduction is one deduction on its way through Handle.
type deduction struct {
	ctx      context.Context
	id       string
	fromIsle bool
	entry    store.SettleEntry
}

// deduction reads m, brought by d, as the debit to apply on now, keyed by
// its deduction id or, for a producer without them, by d (doc/money.md,
// "Messages without ids"); ctx carries d. A record that can never apply is
// a Permanent error.
func (h *Deductor) deduction(ctx context.Context, d messaging.Delivery, m topology.AgentBillingDeduct, now time.Time) (deduction, store.Debit, error) {
	amount, err := m.Amount()
	if err != nil {
		return deduction{}, store.Debit{}, messaging.Permanent(err)
	}
	if store.IsForeignKey(m.DeductionID) {
		// Such an id could name a foreign message's row (doc/money.md).
		return deduction{}, store.Debit{}, messaging.Permanent(fmt.Errorf("deductionId %q: ids beginning %s are the keys of messages without one",
			m.DeductionID, strings.Join(store.ForeignKeyPrefixes, " or ")))
	}
	dd := deduction{ctx: ctx, id: m.DeductionID, fromIsle: m.DeductionID != ""}
	var sameBody string
	if !dd.fromIsle {
		// A producer without deduction ids (the Java backend): keyed by
		// its message id, or, for a message without one, by the id the
		// retry middleware gave this delivery (doc/money.md, "Messages
		// without ids").
		dd.id = store.ForeignKey(d.Key(), ledgerIDMax)
		if d.Redelivered && d.SameBody() != "" {
			sameBody = store.ForeignKey(d.SameBody(), ledgerIDMax)
		}
	}
	return dd, store.Debit{
		Username: m.Username, ID: dd.id, Amount: amount, ModelName: m.ModelName,
		InputTokens: int64(m.InputTokens), OutputTokens: int64(m.OutputTokens), OccurredAt: now, Source: "consumer",
		SelfSettled: !dd.fromIsle, // the producer's own script keeps its Redis balance
		Ref:         m.PendingRef, RequestHash: m.RequestHash, SameBody: sameBody,
	}, nil
}

// applied deals with what the ledger did with dd's debit (res, or the
// error of its transaction, retried): it says whether the deduction's
// Redis side is still to settle, with dd.entry set to settle it.
func (h *Deductor) applied(dd *deduction, m topology.AgentBillingDeduct, res store.DebitResult, err error) (bool, error) {
	switch {
	case err != nil:
		return false, fmt.Errorf("apply deduction %s of %s: %w", dd.id, m.Username, err) // retried
	case res.Err != nil:
		return false, messaging.Permanent(fmt.Errorf("deduction %s: %w", dd.id, res.Err))
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
		return false, nil
	}
	// Applied now, or applied before by a process that died before the
	// Redis side: settle it (idempotent), then record that in MySQL. A
	// failure is retried; the ledger row stays as it is.
	return true, nil
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
