package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The money model under faults (doc/money.md): random sequences of deductions
// (new and repeated request ids), recharges, deliveries, duplicate
// deliveries, lost messages, consumer crashes between commit and ack, Redis
// data losses, Redis restored from an earlier snapshot, idempotency markers
// forgotten, and reconciler runs. After every step no balance is negative;
// at quiescence (queue drained, one reconcile) Redis = MySQL = the ledger's
// sum for every user, every deduction reported to a client is in the ledger
// once (taken + shortfall = reported) unless both its message and its
// pending record were destroyed, corrections stay within what retries and
// deductions in flight across a Redis loss (and shortfalls) explain, and
// without a Redis loss there is no correction and no shortfall at all.
func TestMoneyInvariantsUnderFaults(t *testing.T) {
	m := newMoney(t)
	ctx := context.Background()
	// 1.23456789 fen per input token: amounts use all 8 decimals.
	require.NoError(t, store.NewPrices(m.db, m.r).Set(ctx, store.Pricing{Model: "m", Input: dec("1234567.89"), Enabled: true}))
	var world atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		// Each run has a Redis of its own (a key prefix): balance-sync scans,
		// losses and snapshots of one run never meet another run's users,
		// so a failure shrinks to its own steps.
		r, err := store.OpenRedis(store.RedisConfig{Addr: storetest.RedisAddr(), KeyPrefix: storetest.Unique("isletest:") + ":"})
		if err != nil {
			rt.Fatal(err)
		}
		defer func() {
			storetest.Wipe(rt, r)
			r.Close()
		}()
		w := &money{db: m.db, r: r, svc: billing.New(m.db, r), consumer: handlers.NewDeductor(directLedger{m.db}, store.NewBalances(m.db, r), discard)}
		sm := newMachine(rt, w, world.Add(1))
		rt.Repeat(rapid.StateMachineActions(sm))
		sm.quiesce(rt)
	})
}

type dkey struct{ user, id string }

type machine struct {
	m           *money
	users       []string
	opening     map[string]decimal.Decimal
	recharged   map[string]decimal.Decimal
	queue       []queued
	foreign     map[string]foreignCharge   // by message id: deductions a Spring producer took
	springInits int                        // balances a Spring producer initialised (no entry count)
	reported    map[dkey][]decimal.Decimal // what the client was told was deducted (twice only once Redis may have forgotten)
	ids         []dkey
	mayForget   map[dkey]bool // Redis may have forgotten the last charge (a loss, a restore, its marker gone) since it was taken
	pendLost    map[dkey]bool // the last charge's pending record went with Redis
	charged     map[dkey]int  // the step of the last charge
	lost        map[dkey]bool
	gone        map[dkey]bool // message and pending record both destroyed
	losses      int           // Redis losses and restores
	next        int
	step        int
	snap        *storetest.Snapshot
	snapStep    int
	// allowance bounds the corrections a user may see: the amounts of
	// retries taken again after a Redis loss, and what deductions in flight
	// at one could not take from the balance they landed on.
	allowance map[string]decimal.Decimal
	inflight  map[dkey]bool // deductions in flight at a Redis loss, not yet settled
	tokens    map[dkey]int  // each request's body: a retry sends the same
	events    map[string][]string
}

// allEvents is every user's events, for a failure's message.
func (sm *machine) allEvents() string {
	var b strings.Builder
	for _, u := range sm.users {
		fmt.Fprintf(&b, "%s:\n  %s\n", u, strings.Join(sm.events[u], "\n  "))
	}
	return b.String()
}

func (sm *machine) note(user, format string, a ...any) {
	sm.events[user] = append(sm.events[user], fmt.Sprintf(format, a...))
}

func newMachine(t *rapid.T, m *money, world int64) *machine {
	sm := &machine{m: m, opening: map[string]decimal.Decimal{}, recharged: map[string]decimal.Decimal{},
		reported: map[dkey][]decimal.Decimal{}, mayForget: map[dkey]bool{}, pendLost: map[dkey]bool{}, charged: map[dkey]int{},
		lost: map[dkey]bool{}, gone: map[dkey]bool{},
		allowance: map[string]decimal.Decimal{}, inflight: map[dkey]bool{}, events: map[string][]string{}, tokens: map[dkey]int{},
		foreign: map[string]foreignCharge{}}
	m.sync = newMoneySyncGated(m, sm)
	for i := range 3 {
		u := fmt.Sprintf("w%d-u%d", world, i)
		open := decimal.New(int64(rapid.IntRange(0, 4000).Draw(t, "opening")), -2)
		if _, err := store.NewAccounts(m.db).Create(context.Background(), u, "", open); err != nil {
			t.Fatal(err)
		}
		sm.users = append(sm.users, u)
		sm.opening[u] = open
	}
	return sm
}

func (sm *machine) user(t *rapid.T) string { return rapid.SampledFrom(sm.users).Draw(t, "user") }

func (sm *machine) inLedger(t *rapid.T, k dkey) bool {
	var n int64
	if err := sm.m.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE username = ? AND kind = 'DEDUCT' AND entry_id = ?", k.user, k.id).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Deduct is one /v1/agent/usage call: a new request id, or a client's retry.
func (sm *machine) Deduct(t *rapid.T) {
	k := dkey{user: sm.user(t)}
	if len(sm.ids) > 0 && rapid.Bool().Draw(t, "retry") {
		k = rapid.SampledFrom(sm.ids).Draw(t, "retried")
	} else {
		sm.next++
		k.id = fmt.Sprintf("r%d", sm.next)
	}
	tokens, retried := sm.tokens[k]
	if !retried {
		tokens = rapid.IntRange(0, 40).Draw(t, "tokens")
		sm.tokens[k] = tokens
	}
	c, err := sm.m.svc.Charge(context.Background(), billing.Request{ID: k.id, Username: k.user, Model: "m", Tokens: billing.Tokens{Input: int64(tokens)}})
	if errors.Is(err, billing.ErrNoBalance) {
		sm.note(k.user, "deduct %s refused", k.id)
		return
	}
	if err != nil {
		t.Fatalf("charge: %v", err)
	}
	sm.note(k.user, "deduct %s: %s (replayed %t, losses %d)", k.id, c.Deducted, c.Replayed, sm.losses)
	if !c.Deducted.IsPositive() {
		return
	}
	switch prev, ok := sm.reported[k]; {
	case ok && c.Replayed:
		if !slices.ContainsFunc(prev, c.Deducted.Equal) {
			t.Fatalf("request %v replayed with %s, deducted before %s", k, c.Deducted, prev)
		}
	case ok && sm.mayForget[k]:
		// Redis forgot the first charge's marker (and, after a loss, maybe
		// the charge): the retry is taken. If the ledger has the first, the
		// retry is refunded when found; if the first was in flight, the retry
		// stands for it in Redis. Either way the user pays once; the ledger
		// keeps whichever message landed first.
		sm.reported[k] = append(prev, c.Deducted)
		sm.allowance[k.user] = sm.allowance[k.user].Add(decimal.Max(c.Deducted, prev[0], prev[len(prev)-1]))
		sm.charge(k)
	case ok:
		t.Fatalf("request %v charged again: first %s, now %s (replayed %t)", k, prev[0], c.Deducted, c.Replayed)
	case c.Replayed:
		t.Fatalf("request %v reported as a replay of nothing", k)
	default:
		sm.reported[k] = []decimal.Decimal{c.Deducted}
		sm.ids = append(sm.ids, k)
		sm.charge(k)
	}
	sm.queue = append(sm.queue, queued{msg: topology.AgentBillingDeduct{DeductionID: k.id, Username: k.user, AmountFen: c.Deducted.StringFixed(8),
		ModelName: "m", InputTokens: int32(tokens), PendingRef: c.Ref, RequestHash: c.RequestHash}})
}

// charge records that k was just taken in Redis, with a marker and a
// pending record.
func (sm *machine) charge(k dkey) {
	sm.step++
	sm.charged[k] = sm.step
	sm.mayForget[k], sm.pendLost[k] = false, false
}

// queued is a deduction message in the queue: Isle's, or a Spring
// producer's (no deduction id; its AMQP message id keys it).
type queued struct {
	msg       topology.AgentBillingDeduct
	messageID string // set for a foreign message
}

func (q queued) String() string {
	if q.messageID != "" {
		return "foreign " + q.messageID
	}
	return q.msg.DeductionID
}

func (sm *machine) pick(t *rapid.T) (int, queued) {
	if len(sm.queue) == 0 {
		t.Skip("no message in the queue")
	}
	i := rapid.IntRange(0, len(sm.queue)-1).Draw(t, "message")
	return i, sm.queue[i]
}

func (sm *machine) drop(i int) { sm.queue = append(sm.queue[:i], sm.queue[i+1:]...) }

// expose is called before a deduction in flight at a Redis loss may be
// settled: what it can find uncovered is its amount beyond the balance it
// lands on (none when the balance is missing: the initialisation reads
// MySQL, which has it by then).
func (sm *machine) expose(t *rapid.T, k dkey) {
	if !sm.inflight[k] {
		return
	}
	bal, err := store.NewBalances(nil, sm.m.r).Balance(context.Background(), k.user)
	if errors.Is(err, store.ErrBalanceMissing) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if over := decimal.Max(sm.reported[k][0], sm.reported[k][1:]...).Sub(bal); over.IsPositive() {
		sm.allowance[k.user] = sm.allowance[k.user].Add(over)
	}
}

// handle hands a message to the consumer.
func (sm *machine) handle(t *rapid.T, q queued) {
	ctx := context.Background()
	if q.messageID != "" {
		ctx = messaging.WithDelivery(ctx, messaging.Delivery{MessageID: q.messageID})
	}
	k := dkey{q.msg.Username, q.msg.DeductionID}
	sm.expose(t, k)
	if err := sm.m.consumer.Handle(ctx, q.msg); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	delete(sm.inflight, k) // settled now, or before
}

// Deliver hands a message to the consumer, which acks it.
func (sm *machine) Deliver(t *rapid.T) {
	i, q := sm.pick(t)
	sm.handle(t, q)
	sm.note(q.msg.Username, "deliver %s", q)
	sm.drop(i)
}

// DeliverTwice is a redelivery: the consumer handles it, and it stays queued.
func (sm *machine) DeliverTwice(t *rapid.T) {
	_, q := sm.pick(t)
	sm.handle(t, q)
	sm.note(q.msg.Username, "deliver twice %s", q)
}

// Crash is a consumer killed between the MySQL commit and the ack: the
// message is redelivered later, Redis was not touched.
func (sm *machine) Crash(t *rapid.T) {
	_, q := sm.pick(t)
	msg := q.msg
	amount, _ := msg.Amount()
	sm.note(msg.Username, "crash after committing %s", q)
	d := store.Debit{Username: msg.Username, ID: msg.DeductionID, Amount: amount, Source: "consumer", Ref: msg.PendingRef, RequestHash: msg.RequestHash}
	if q.messageID != "" {
		d.ID, d.SelfSettled = "msg:"+q.messageID, true
	}
	if _, err := store.NewLedger(sm.m.db).ApplyDebits(context.Background(), []store.Debit{d}); err != nil {
		t.Fatal(err)
	}
}

// Lose drops a message for good.
func (sm *machine) Lose(t *rapid.T) {
	i, q := sm.pick(t)
	sm.drop(i)
	sm.note(q.msg.Username, "lose %s", q)
	if q.messageID != "" {
		sm.loseForeign(t, q)
		return
	}
	k := dkey{q.msg.Username, q.msg.DeductionID}
	sm.lost[k] = true
	if sm.pendLost[k] && !sm.inLedger(t, k) {
		sm.gone[k] = true // its pending record went with Redis
	}
}

// RedisLoss restarts Redis without its data.
func (sm *machine) RedisLoss(t *rapid.T) {
	storetest.Wipe(t, sm.m.r)
	sm.losses++
	for _, u := range sm.users {
		sm.note(u, "REDIS LOSS")
	}
	for k := range sm.reported {
		sm.forgetCharge(t, k)
	}
}

// forgetCharge records that Redis lost k's last charge: its marker and
// its pending record.
func (sm *machine) forgetCharge(t *rapid.T, k dkey) {
	sm.mayForget[k], sm.pendLost[k] = true, true
	switch {
	case sm.inLedger(t, k):
	case sm.lost[k]:
		sm.gone[k] = true
	default:
		// In flight: the restored balance does not know it, and what the
		// user spends of it before the message lands is forgiven.
		sm.inflight[k] = true
	}
}

// Snapshot is an RDB save (or a replica's position): Redis may come back to it.
func (sm *machine) Snapshot(t *rapid.T) {
	sm.snap, sm.snapStep = storetest.TakeSnapshot(t, sm.m.r), sm.step
	for _, u := range sm.users {
		sm.note(u, "snapshot")
	}
}

// RedisRestore brings Redis back from the last snapshot: every change since
// is gone, every key changed since is as it was then.
func (sm *machine) RedisRestore(t *rapid.T) {
	if sm.snap == nil {
		t.Skip("no snapshot")
	}
	sm.snap.Restore(t)
	sm.losses++
	for _, u := range sm.users {
		sm.note(u, "REDIS RESTORED from snapshot")
	}
	for k := range sm.reported {
		sm.mayForget[k] = true // markers set since the snapshot are gone
		if sm.charged[k] > sm.snapStep {
			sm.forgetCharge(t, k)
		}
	}
}

// ForgetMarker drops a deduction's idempotency markers, as their expiry
// does: its pending record, if any, stays.
func (sm *machine) ForgetMarker(t *rapid.T) {
	if len(sm.ids) == 0 {
		t.Skip("no deduction")
	}
	k := rapid.SampledFrom(sm.ids).Draw(t, "forgotten")
	c := sm.m.r.Client(keys.DBAgentBilling)
	if err := c.Del(context.Background(), sm.m.r.Keys().AgentDeduction(k.user, k.id), sm.m.r.Keys().AgentSettled(k.user, store.SettleDeduction, k.id)).Err(); err != nil {
		t.Fatal(err)
	}
	sm.mayForget[k] = true
	sm.note(k.user, "forget marker of %s", k.id)
}

// Recharge credits a user.
func (sm *machine) Recharge(t *rapid.T) {
	u := sm.user(t)
	amount := decimal.New(int64(rapid.IntRange(1, 3000).Draw(t, "recharge")), -2)
	sm.next++
	if _, err := store.NewBalances(sm.m.db, sm.m.r).Credit(context.Background(), store.Credit{Username: u, ID: fmt.Sprintf("c%d", sm.next), Amount: amount}); err != nil {
		t.Fatal(err)
	}
	sm.recharged[u] = sm.recharged[u].Add(amount)
	sm.note(u, "recharge c%d %s", sm.next, amount)
}

// Reconcile runs balance-sync, which settles what a crash left unsettled.
func (sm *machine) Reconcile(t *rapid.T) {
	var committed []dkey
	for k := range sm.inflight {
		if sm.inLedger(t, k) {
			sm.expose(t, k)
			committed = append(committed, k)
		}
	}
	res, err := sm.m.sync.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := res.(reconcile.BalanceResult)
	if r.Errors > 0 || r.Unreadable > 0 {
		t.Fatalf("balance-sync: %s\nevents:\n%s", r, sm.allEvents())
	}
	if r.Rebuilt > 0 && sm.losses == 0 && sm.springInits == 0 {
		// Redis and MySQL count the same entries unless Redis lost or
		// went back, or someone else initialised a balance.
		t.Fatalf("balance-sync rebuilt a hot balance without a Redis loss: %s\nevents:\n%s", r, sm.allEvents())
	}
	for _, k := range committed {
		delete(sm.inflight, k)
	}
	for _, u := range sm.users {
		sm.note(u, "reconcile: %s", res)
	}
}

// Check holds after every step: no balance below zero, anywhere.
func (sm *machine) Check(t *rapid.T) {
	ctx := context.Background()
	for _, u := range sm.users {
		if bal, err := store.NewBalances(nil, sm.m.r).Balance(ctx, u); err == nil && bal.IsNegative() {
			t.Fatalf("Redis balance of %s is %s", u, bal)
		}
		var mysql decimal.Decimal
		if err := sm.m.db.Raw("SELECT balance_fen FROM user_account WHERE username = ?", u).Scan(&mysql).Error; err != nil {
			t.Fatal(err)
		}
		if mysql.IsNegative() {
			t.Fatalf("MySQL balance of %s is %s", u, mysql)
		}
	}
}

// quiesce drains the queue, reconciles, and checks the invariants of a quiet system.
func (sm *machine) quiesce(t *rapid.T) {
	ctx := context.Background()
	for len(sm.queue) > 0 {
		sm.handle(t, sm.queue[0])
		sm.drop(0)
	}
	sm.Reconcile(t)
	for _, u := range sm.users {
		redis, err := sm.m.svc.Balance(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		var row struct {
			Balance   decimal.Decimal
			Sum       decimal.Decimal
			Adjust    decimal.Decimal // the sum of the corrections' sizes
			Shortfall decimal.Decimal
		}
		if err := sm.m.db.Raw(`SELECT u.balance_fen AS balance,
			COALESCE((SELECT SUM(amount_fen) FROM agent_ledger WHERE username = u.username), 0) AS sum,
			COALESCE((SELECT SUM(ABS(amount_fen)) FROM agent_ledger WHERE username = u.username AND kind = 'ADJUST'), 0) AS adjust,
			COALESCE((SELECT SUM(shortfall_fen) FROM agent_ledger WHERE username = u.username), 0) AS shortfall
			FROM user_account u WHERE username = ?`, u).Scan(&row).Error; err != nil {
			t.Fatal(err)
		}
		if !redis.Equal(row.Balance) || !row.Balance.Equal(row.Sum) {
			t.Fatalf("%s at quiescence: Redis %s, MySQL %s, ledger sum %s", u, redis, row.Balance, row.Sum)
		}
		hot, err := store.NewBalances(nil, sm.m.r).Hot(ctx, []string{u})
		if err != nil {
			t.Fatal(err)
		}
		acct, err := store.NewAccounts(sm.m.db).Get(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if h := hot[u]; !h.EntriesKnown || h.Entries != acct.HotEntries {
			t.Fatalf("%s at quiescence: Redis reflects %d entries (known %t), MySQL holds %d", u, h.Entries, h.EntriesKnown, acct.HotEntries)
		}
		if sm.losses == 0 && sm.allowance[u].IsZero() && (!row.Adjust.IsZero() || !row.Shortfall.IsZero()) {
			t.Fatalf("%s: adjustments %s and shortfall %s without any Redis loss", u, row.Adjust, row.Shortfall)
		}
		// Corrections are legitimate only where Redis and the ledger saw
		// different amounts for one request (a retry taken again after a
		// loss), where the restored balance was spent before a deduction in
		// flight landed, or where MySQL could not cover a deduction; and
		// never larger than those amounts. Anything else is money forgiven
		// or charged twice.
		if allowed := sm.allowance[u].Add(row.Shortfall); row.Adjust.GreaterThan(allowed) {
			var entries []store.LedgerEntry
			_ = sm.m.db.Where("username = ?", u).Order("seq").Find(&entries).Error
			var lines []string
			for _, e := range entries {
				lines = append(lines, fmt.Sprintf("seq %d %s %s %s (source %s)", e.Seq, e.Kind, e.EntryID, e.AmountFen, e.Source))
			}
			t.Fatalf("%s: corrections of %s, at most %s explained by retries and deductions in flight across a loss and shortfalls; ledger:\n%s\nevents:\n%s",
				u, row.Adjust, allowed, strings.Join(lines, "\n"), strings.Join(sm.events[u], "\n"))
		}
	}
	sm.checkForeign(t)
	for k, want := range sm.reported {
		var e store.LedgerEntry
		err := sm.m.db.Where("username = ? AND kind = 'DEDUCT' AND entry_id = ?", k.user, k.id).Take(&e).Error
		if sm.gone[k] {
			continue
		}
		if err != nil {
			t.Fatalf("deduction %v reported to the client (%s) is not in the ledger: %v", k, want, err)
		}
		got := e.Deducted()
		if !slices.ContainsFunc(want, got.Equal) {
			t.Fatalf("deduction %v: ledger %s + shortfall %s, reported %s", k, e.AmountFen.Neg(), e.ShortfallFen, want)
		}
	}
}
