package order_test

import (
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Only a verified SUCCESS that lacks the amount or the currency needs its
// callback's word: the Spring producer's.
func TestNeedsProof(t *testing.T) {
	t.Parallel()
	o := recharge(order.Pending, "")
	paid := notice(o, order.TradeSuccess, "wx-1")
	require.False(t, order.NeedsProof(paid), "Isle's message carries the amount")
	spring := paid
	spring.AmountFen, spring.Currency = nil, ""
	require.True(t, order.NeedsProof(spring))
	noCurrency := paid
	noCurrency.Currency = ""
	require.True(t, order.NeedsProof(noCurrency))
	unverified := spring
	unverified.VerifyOK = false
	require.False(t, order.NeedsProof(unverified), "refused as unverified before anything")
	require.False(t, order.NeedsProof(notice(o, order.TradeClosed, "")), "a closure grants nothing")
}

// The callback decides what is applied, and must say what the message
// says of the order, its state and its transaction (and amount, if any).
func TestProvenTakesTheCallbacksWord(t *testing.T) {
	t.Parallel()
	o := recharge(order.Pending, "")
	when := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	proof := notice(o, order.TradeSuccess, "wx-1")
	proof.SuccessTime, proof.RawBody = topology.OffsetDateTime{Time: when}, "re-encoded"
	claim := proof
	claim.AmountFen, claim.Currency, claim.SuccessTime, claim.NotifyID = nil, "", topology.OffsetDateTime{}, "spring-id"
	claim.RawBody, claim.LastError = "as received", "earlier"

	got, err := order.Proven(claim, proof)
	require.NoError(t, err)
	want := proof
	want.RawBody, want.LastError = "as received", "earlier"
	require.Equal(t, want, got)

	noTx := claim
	noTx.TransactionID = ""
	got, err = order.Proven(noTx, proof)
	require.NoError(t, err)
	require.Equal(t, "wx-1", got.TransactionID, "the callback's transaction")

	for name, edit := range map[string]func(*topology.PaymentNotify){
		"another channel":     func(n *topology.PaymentNotify) { n.Channel = order.ChannelAlipay },
		"another order":       func(n *topology.PaymentNotify) { n.OutTradeNo = "EI2" },
		"another state":       func(n *topology.PaymentNotify) { n.TradeState = order.TradeClosed },
		"another transaction": func(n *topology.PaymentNotify) { n.TransactionID = "wx-2" },
		"another amount":      func(n *topology.PaymentNotify) { one := int64(1); n.AmountFen = &one },
		"another currency":    func(n *topology.PaymentNotify) { n.Currency = "USD" },
	} {
		c := claim
		edit(&c)
		_, err := order.Proven(c, proof)
		require.ErrorIs(t, err, order.ErrMismatch, name)
	}
}
