package reconcile_test

import (
	"context"
	"fmt"

	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"pgregory.net/rapid"
)

// foreignCharge is a deduction a Spring producer took in Redis with its
// own script: no pending record, no marker; only its message tells MySQL.
type foreignCharge struct {
	user   string
	amount decimal.Decimal
	lost   bool
}

// DeductionsInFlight is the model's in-flight gate: a foreign message is
// still queued (doc/money.md, "Deductions other producers take"). Isle's own deductions need no gate: their
// pending records keep their users busy.
func (sm *machine) DeductionsInFlight(context.Context) (reconcile.Holds, error) {
	for _, q := range sm.queue {
		if q.messageID != "" {
			return reconcile.Holds{All: "foreign message " + q.messageID + " queued"}, nil
		}
	}
	return reconcile.Holds{}, nil
}

// springInit is what a Spring producer does with a missing balance: SETNX
// it from MySQL, with none of Isle's bookkeeping (the customer's Redis document, "Balance
// Initialization").
func (sm *machine) springInit(t *rapid.T, user string) {
	var bal decimal.Decimal
	if err := sm.m.db.Raw("SELECT balance_fen FROM user_account WHERE username = ?", user).Scan(&bal).Error; err != nil {
		t.Fatal(err)
	}
	if err := sm.m.r.Client(keys.DBAgentBilling).SetNX(context.Background(), sm.m.r.Keys().AgentBalance(user), bal.StringFixed(8), 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// ForeignDeduct is a Spring producer charging a user: its script takes
// min(balance, amount) (initialising a missing balance its own way first)
// and its message, keyed by a message id only, joins the queue.
func (sm *machine) ForeignDeduct(t *rapid.T) {
	u := sm.user(t)
	amount := decimal.New(int64(rapid.IntRange(1, 2000).Draw(t, "foreign amount")), -2).StringFixed(8)
	run := func() string {
		took, err := springDeduct.Run(context.Background(), sm.m.r.Client(keys.DBAgentBilling), []string{sm.m.r.Keys().AgentBalance(u)}, amount).Text()
		if err != nil {
			t.Fatal(err)
		}
		return took
	}
	took := run()
	if took == "-1" {
		sm.springInit(t, u)
		sm.springInits++
		sm.note(u, "spring initialised the balance")
		took = run()
	}
	if took == "-3" {
		sm.note(u, "foreign deduction refused")
		return
	}
	sm.next++
	id := fmt.Sprintf("f%d", sm.next)
	d := decimal.RequireFromString(took)
	sm.foreign[id] = foreignCharge{user: u, amount: d}
	sm.queue = append(sm.queue, queued{msg: topology.AgentBillingDeduct{Username: u, AmountFen: took, ModelName: "spring-model"}, messageID: id})
	sm.note(u, "foreign deduct %s: %s", id, took)
}

// loseForeign records a foreign message lost for good: only Redis knows
// its deduction, and balance-sync may bring MySQL down by it.
func (sm *machine) loseForeign(t *rapid.T, q queued) {
	f := sm.foreign[q.messageID]
	f.lost = true
	sm.foreign[q.messageID] = f
	sm.allowance[f.user] = sm.allowance[f.user].Add(f.amount)
}

// checkForeign holds at quiescence: every foreign deduction whose message
// arrived is in the ledger once, with what the producer took.
func (sm *machine) checkForeign(t *rapid.T) {
	for id, f := range sm.foreign {
		var rows []store.LedgerEntry
		if err := sm.m.db.Where("username = ? AND kind = 'DEDUCT' AND entry_id = ?", f.user, "msg:"+id).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		switch {
		case f.lost && len(rows) == 0:
		case len(rows) != 1:
			t.Fatalf("foreign deduction %s of %s (%s): %d ledger rows", id, f.user, f.amount, len(rows))
		case !rows[0].Deducted().Equal(f.amount):
			t.Fatalf("foreign deduction %s of %s: ledger %s, taken %s", id, f.user, rows[0].Deducted(), f.amount)
		}
	}
}
