package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
)

// Ledger applies debits to MySQL exactly once (a group-committing
// store.Batcher over store.ApplyDebits in the worker).
type Ledger interface {
	Do(ctx context.Context, d store.Debit) (store.DebitResult, error)
}

// BalanceSettler reflects committed ledger entries in the Redis balance.
type BalanceSettler interface {
	Settle(ctx context.Context, entries ...store.SettleEntry) ([]string, error)
	ClearPending(ctx context.Context, username, id string, deducted decimal.Decimal) error
}

// BillingDeduct persists a Redis-side deduction to MySQL exactly once
// (SPEC 4.3, 6): the ledger row keyed by the deduction id and the balance
// decrement commit together; then the deduction's pending entry is removed
// (or, after a Redis loss took it, the balance is settled).
type BillingDeduct struct {
	ledger  Ledger
	balance BalanceSettler
	log     *slog.Logger
	now     func() time.Time
}

// NewBillingDeduct returns the agent-billing consumer.
func NewBillingDeduct(l Ledger, b BalanceSettler, log *slog.Logger) *BillingDeduct {
	if l == nil || b == nil || log == nil {
		panic("handlers: NewBillingDeduct: nil dependency") // a wiring bug stops start-up
	}
	return &BillingDeduct{ledger: l, balance: b, log: log, now: time.Now}
}

// Handle applies one deduction.
func (h *BillingDeduct) Handle(ctx context.Context, m topology.AgentBillingDeduct) error {
	amount, err := m.Amount()
	if err != nil {
		return messaging.Permanent(err)
	}
	id, fromIsle := m.DeductionID, m.DeductionID != ""
	if !fromIsle {
		// A producer without deduction ids (the Java backend): a key stable
		// across redeliveries, from the message id or the body's hash.
		d, _ := messaging.DeliveryFrom(ctx)
		id = "msg:" + d.MessageID
	}
	res, err := h.ledger.Do(ctx, store.Debit{
		Username: m.Username, ID: id, Amount: amount, ModelName: m.ModelName,
		InputTokens: int64(m.InputTokens), OutputTokens: int64(m.OutputTokens), OccurredAt: h.now(), Source: "consumer",
	})
	if err != nil {
		return fmt.Errorf("apply deduction %s of %s: %w", id, m.Username, err) // retried
	}
	if res.Err != nil {
		return messaging.Permanent(fmt.Errorf("deduction %s: %w", id, res.Err))
	}
	if res.Shortfall.IsPositive() {
		h.log.WarnContext(ctx, "deduction larger than the MySQL balance", "user", m.Username, "deduction", id, "shortfall", res.Shortfall)
	}
	if !fromIsle {
		return nil // the producer's own script keeps its Redis balance
	}
	if !res.Applied {
		// Applied before (a redelivery, or the reconciler): only the pending
		// entry may be left.
		if err := h.balance.ClearPending(ctx, m.Username, id, res.Amount.Add(res.Shortfall)); err != nil {
			h.log.WarnContext(ctx, "could not clear a pending deduction; the reconciler will", "deduction", id, "err", err)
		}
		return nil
	}
	_, err = h.balance.Settle(ctx, store.SettleEntry{Username: m.Username, Kind: store.SettleDeduction, EntryID: id,
		Amount: res.Amount, Seq: res.Seq, Deducted: res.Amount.Add(res.Shortfall)})
	if err != nil && !errors.Is(err, context.Canceled) {
		// MySQL has it; a pending entry left behind is cleared by the reconciler.
		h.log.WarnContext(ctx, "deduction applied, but Redis could not be settled", "deduction", id, "err", err)
	}
	return nil
}
