package handlers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeLedger keeps the store's idempotency rule: a debit applies once per
// (user, id); a second call returns the first row, Applied false.
type fakeLedger struct {
	rows    map[[2]string]store.DebitResult
	settled map[[2]string]bool
	fail    error
	unknown bool   // every user is unknown (a permanent refusal)
	missing string // this user is unknown
}

func newFakeLedger() *fakeLedger {
	return &fakeLedger{rows: map[[2]string]store.DebitResult{}, settled: map[[2]string]bool{}}
}

func (l *fakeLedger) ApplyDebits(ctx context.Context, ds []store.Debit) ([]store.DebitResult, []error) {
	rs, errs := make([]store.DebitResult, len(ds)), make([]error, len(ds))
	for i, d := range ds {
		rs[i], errs[i] = l.apply(d)
	}
	return rs, errs
}

func (l *fakeLedger) apply(d store.Debit) (store.DebitResult, error) {
	if l.fail != nil {
		return store.DebitResult{}, l.fail
	}
	if l.unknown || d.Username == l.missing {
		return store.DebitResult{Err: store.ErrUnknownUser}, nil
	}
	k := [2]string{d.Username, d.ID}
	if r, ok := l.rows[k]; ok {
		r.Applied, r.Settled = false, l.settled[k]
		return r, nil
	}
	for have, r := range l.rows { // a redelivered message without an id, applied before
		if d.SameBody != "" && have[0] == d.Username && strings.HasPrefix(have[1], d.SameBody) {
			r.Applied, r.Settled = false, l.settled[have]
			return r, nil
		}
	}
	r := store.DebitResult{Applied: true, Seq: uint64(len(l.rows) + 1), Amount: d.Amount, Settled: d.SelfSettled, Ref: d.Ref}
	l.rows[k], l.settled[k] = r, d.SelfSettled
	return r, nil
}

func (l *fakeLedger) NoteSettled(entries ...store.EntryKey) {
	for _, e := range entries {
		l.settled[[2]string{e.Username, e.EntryID}] = true
	}
}

// fakeBalance records what the consumer asked of the hot balance.
type fakeBalance struct {
	settled, resettled []string
	calls              int
}

func (b *fakeBalance) Settle(_ context.Context, entries ...store.SettleEntry) ([]store.SettleResult, error) {
	b.calls++
	out := make([]store.SettleResult, len(entries))
	for i, e := range entries {
		b.settled = append(b.settled, e.EntryID)
		out[i].Outcome = store.SettleCleared
	}
	return out, nil
}

func (b *fakeBalance) Resettle(_ context.Context, e store.SettleEntry) (store.ResettleResult, error) {
	b.resettled = append(b.resettled, e.EntryID)
	return store.ResettleResult{Outcome: store.ResettleNone}, nil
}

func TestBillingDeductAppliesOnceAndSettles(t *testing.T) {
	t.Parallel()
	l, b := newFakeLedger(), &fakeBalance{}
	h := handlers.NewDeductor(l, b, quiet)
	msg := topology.AgentBillingDeduct{DeductionID: "r1", Username: "u", AmountFen: "1.5", ModelName: "m", PendingRef: "aa"}
	require.NoError(t, h.Handle(context.Background(), msg))
	require.NoError(t, h.Handle(context.Background(), msg), "a redelivery")
	require.Len(t, l.rows, 1)
	require.True(t, l.rows[[2]string{"u", "r1"}].Amount.Equal(decimal.RequireFromString("1.5")))
	require.Equal(t, []string{"r1"}, b.settled, "settled once")
	require.Equal(t, []string{"r1"}, b.resettled, "the redelivery meets a settled row")
}

// A producer without deduction ids (the Spring backend) is keyed by the
// message id, and its row needs no settling: its own script moved Redis.
func TestBillingDeductKeysAForeignMessageByItsID(t *testing.T) {
	t.Parallel()
	l, b := newFakeLedger(), &fakeBalance{}
	h := handlers.NewDeductor(l, b, quiet)
	ctx := messaging.WithDelivery(context.Background(), messaging.Delivery{MessageID: "spring-7"})
	require.NoError(t, h.Handle(ctx, topology.AgentBillingDeduct{Username: "u", AmountFen: "2", ModelName: "m"}))
	require.Contains(t, l.rows, [2]string{"u", "msg:spring-7"})
	require.Empty(t, b.settled)
	require.Empty(t, b.resettled)
}

// What can never succeed goes to the DLQ at once (a permanent error); what
// may succeed later is retried.
func TestBillingDeductRetriesOrDeadLetters(t *testing.T) {
	t.Parallel()
	msg := topology.AgentBillingDeduct{DeductionID: "r1", Username: "u", AmountFen: "1", ModelName: "m"}
	l := newFakeLedger()
	l.fail = errors.New("deadlock")
	err := handlers.NewDeductor(l, &fakeBalance{}, quiet).Handle(context.Background(), msg)
	require.Error(t, err)
	require.False(t, messaging.IsPermanent(err), "a database failure is retried")

	l = newFakeLedger()
	l.unknown = true
	err = handlers.NewDeductor(l, &fakeBalance{}, quiet).Handle(context.Background(), msg)
	require.True(t, messaging.IsPermanent(err), "an unknown user goes to the DLQ")

	bad := msg
	bad.AmountFen = "-1"
	err = handlers.NewDeductor(newFakeLedger(), &fakeBalance{}, quiet).Handle(context.Background(), bad)
	require.True(t, messaging.IsPermanent(err), "a bad amount goes to the DLQ")
}
