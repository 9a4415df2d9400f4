package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// Ledger applies debits to MySQL exactly once and records entries whose
// Redis side is done (store.LedgerWriter, group-committed).
type Ledger interface {
	ApplyDebit(ctx context.Context, d store.Debit) (store.DebitResult, error)
	MarkSettled(ctx context.Context, entries ...store.EntryKey) error
}

// BalanceSettler reflects committed ledger entries in the Redis balance
// (Settle), and deals with a pending record met again by an entry settled
// before (Resettle: cleared when it is the entry's own, refunded when it is
// a second charge of the id).
type BalanceSettler interface {
	Settle(ctx context.Context, entries ...store.SettleEntry) ([]store.SettleResult, error)
	Resettle(ctx context.Context, e store.SettleEntry) (store.ResettleResult, error)
}

// BillingDeduct persists a Redis-side deduction to MySQL exactly once
// (doc/money.md): the ledger row keyed by the deduction id and the balance
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

// billingDeductConsumer is the agent-billing consumer of the registry.
func billingDeductConsumer(d Deps, log *slog.Logger) messaging.HandlerFunc {
	return messaging.Typed(NewBillingDeduct(d.Ledger, store.NewBalances(d.DB, d.Redis), log).Handle)
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
		id = fitKey("msg:"+d.MessageID, 128)
	}
	res, err := h.ledger.ApplyDebit(ctx, store.Debit{
		Username: m.Username, ID: id, Amount: amount, ModelName: m.ModelName,
		InputTokens: int64(m.InputTokens), OutputTokens: int64(m.OutputTokens), OccurredAt: h.now(), Source: "consumer",
		SelfSettled: !fromIsle, // the producer's own script keeps its Redis balance
		Ref:         m.PendingRef, RequestHash: m.RequestHash,
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
	entry := store.SettleEntry{Username: m.Username, Kind: store.SettleDeduction, EntryID: id,
		Amount: res.Amount, Seq: res.Seq, Deducted: res.Amount.Add(res.Shortfall), Ref: res.Ref, RequestHash: res.RequestHash}
	if res.Settled {
		if !fromIsle {
			return nil
		}
		// Applied and settled before (a redelivery, the reconciler, or a
		// second charge of the id): a pending record of the id may be left.
		h.resettle(ctx, entry)
		return nil
	}
	// Applied now, or applied before by a process that died before the Redis
	// side: settle it (idempotent), then record that in MySQL. A failure is
	// retried; the ledger row stays as it is.
	settled, err := h.balance.Settle(ctx, entry)
	if err == nil {
		err = settled[0].Err
	}
	if err != nil {
		return fmt.Errorf("deduction %s is in MySQL, settling Redis: %w", id, err)
	}
	if settled[0].Outcome == store.SettleRefunded {
		h.log.WarnContext(ctx, "request id charged again after Redis forgot it; the second charge is refunded",
			"user", m.Username, "deduction", id, "refunded", settled[0].Refunded)
	}
	if settled[0].Uncovered.IsPositive() {
		h.log.WarnContext(ctx, "deduction landed after a Redis loss on a balance already spent; the part it could not take is forgiven (balance-sync records an ADJUST)",
			"user", m.Username, "deduction", id, "uncovered", settled[0].Uncovered)
	}
	if err := h.ledger.MarkSettled(ctx, store.EntryKey{Username: m.Username, Kind: store.LedgerDeduct, EntryID: id}); err != nil {
		return fmt.Errorf("deduction %s settled, recording it: %w", id, err)
	}
	return nil
}

// resettle clears or refunds a pending record of an entry settled before.
// A failure is left to balance-sync, which finds the record when it is old.
func (h *BillingDeduct) resettle(ctx context.Context, e store.SettleEntry) {
	out, err := h.balance.Resettle(ctx, e)
	switch {
	case err != nil:
		h.log.WarnContext(ctx, "could not deal with a pending record of a settled deduction; balance-sync will", "deduction", e.EntryID, "err", err)
	case out.Outcome == store.ResettleRefunded:
		h.log.WarnContext(ctx, "request id charged again after Redis forgot it; the second charge is refunded",
			"user", e.Username, "deduction", e.EntryID, "refunded", out.Refunded)
	}
}

// fitKey keeps a derived idempotency key within its column: a longer one is
// replaced by its SHA-256, which is as stable.
func fitKey(key string, max int) string {
	if len(key) <= max {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}
