package order

import (
	"errors"
	"fmt"

	"github.com/eisland/isle/topology"
)

// ErrUnproven is a SUCCESS without the amount and currency paid (the Spring
// producer's PaymentNotifyMessage) whose rawBody proves nothing: no
// callback the gateway's keys verify, or no keys to verify it with.
var ErrUnproven = errors.New("order: a payment notification without its amount, and no verified callback to say it")

// NeedsProof reports whether n is a SUCCESS, verified by its publisher's
// word, that lacks amountFen or currency: what was paid is then only what
// the gateway's callback in its rawBody says, once verified (Proven). The
// Spring producer's paid notifications are such.
func NeedsProof(n topology.PaymentNotify) bool {
	return n.VerifyOK && n.TradeState == TradeSuccess && (n.AmountFen == nil || n.Currency == "")
}

// Proven is the notification to apply for claim, one that NeedsProof, given
// proof, the message its rawBody's callback makes once the gateway's keys
// verified it. The callback must be of the claim's channel, order and
// state, and agree with the transaction id and amount the claim carries,
// if any (ErrMismatch otherwise, naming both); then the callback decides:
// what is applied is its notify id, transaction, success time, amount and
// currency, with the claim's rawBody kept for the record. Whether the
// amount is the order's is still Order.Apply's to check.
func Proven(claim, proof topology.PaymentNotify) (topology.PaymentNotify, error) {
	switch {
	case proof.Channel != claim.Channel:
		return topology.PaymentNotify{}, fmt.Errorf("%w: rawBody is a %s callback, the message says %s", ErrMismatch, proof.Channel, claim.Channel)
	case proof.OutTradeNo != claim.OutTradeNo:
		return topology.PaymentNotify{}, fmt.Errorf("%w: rawBody is the callback of order %s, the message names order %s",
			ErrMismatch, proof.OutTradeNo, claim.OutTradeNo)
	case proof.TradeState != claim.TradeState:
		return topology.PaymentNotify{}, fmt.Errorf("%w: rawBody says %s, the message %s", ErrMismatch, proof.TradeState, claim.TradeState)
	case claim.TransactionID != "" && proof.TransactionID != claim.TransactionID:
		return topology.PaymentNotify{}, fmt.Errorf("%w: rawBody is transaction %s, the message says %s", ErrMismatch, proof.TransactionID, claim.TransactionID)
	case claim.AmountFen != nil && (proof.AmountFen == nil || *proof.AmountFen != *claim.AmountFen):
		return topology.PaymentNotify{}, fmt.Errorf("%w: rawBody pays %s, the message says %d", ErrMismatch, fen(proof.AmountFen), *claim.AmountFen)
	case claim.Currency != "" && proof.Currency != claim.Currency:
		return topology.PaymentNotify{}, fmt.Errorf("%w: rawBody pays in %q, the message says %q", ErrMismatch, proof.Currency, claim.Currency)
	}
	n := proof
	n.VerifyOK = true
	n.RawBody, n.LastError = claim.RawBody, claim.LastError
	if n.NotifyID == "" {
		n.NotifyID = claim.NotifyID
	}
	return n, nil
}

// fen writes an amount that may be missing.
func fen(a *int64) string {
	if a == nil {
		return "no amount"
	}
	return fmt.Sprint(*a)
}
