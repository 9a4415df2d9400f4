package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
)

// effects is what the run's requests changed, read back from MySQL, the
// API, the broker and the mail sink.
type effects struct {
	OrdersPaid, OrdersWanted int // of the orders whose callback the API took
	ReceiptsSent             int // receipt_sent_at set on them
	Recharges                int // RECHARGE rows of the paid recharge orders
	ProMonths, ProGranted    int // pro-month orders paid; users whose pro_expire_at moved
	Leftovers                int // orders an earlier run left unpaid, paid by this one
	RechargedFen             decimal.Decimal
	DeductRows, DeductWanted int // DEDUCT rows of the run's request ids; charges that deducted
	UsageEvents, UsageAll    int // agent_usage_event rows of the run's charges; charges taken
	Identities, IdentityAll  int // verifications whose material was stored; passes taken
	Replicated, ObjectsAll   int // objects whose replication is done; uploads taken
	ObjectStates             map[string]int
	BestsStored, BestsAll    int // (user, game) whose MySQL best is at least the run's best
	Mails                    mailCount
	MailsWanted              int          // codes accepted and receipts of paid orders
	Queued                   []queueDepth // queues holding messages
	QueueErr                 error        // the broker could not be asked
	Errs                     []string     // read-backs that failed
	At                       time.Time    // when they were read
}

// complete reports whether everything the run caused has shown up.
func (fx effects) complete() bool {
	return fx.OrdersPaid >= fx.OrdersWanted && fx.ReceiptsSent >= fx.OrdersWanted && fx.DeductRows >= fx.DeductWanted &&
		fx.UsageEvents >= fx.UsageAll && fx.Identities >= fx.IdentityAll && fx.Replicated >= fx.ObjectsAll && fx.BestsStored >= fx.BestsAll && fx.Mails.total() >= fx.MailsWanted &&
		len(fx.awaited()) == 0
}

// progress is the share of the effects seen, and what is still awaited.
func (fx effects) progress() (float64, string) {
	parts := []struct {
		have, want int
		what       string
	}{
		{fx.OrdersPaid, fx.OrdersWanted, "orders PAID"},
		{fx.ReceiptsSent, fx.OrdersWanted, "receipts"},
		{fx.DeductRows, fx.DeductWanted, "deductions"},
		{fx.UsageEvents, fx.UsageAll, "usage events"},
		{fx.Identities, fx.IdentityAll, "identity material"},
		{fx.Replicated, fx.ObjectsAll, "objects replicated"},
		{fx.BestsStored, fx.BestsAll, "best scores"},
		{fx.Mails.total(), fx.MailsWanted, "mails"},
	}
	have, want := 0, 0
	var waiting []string
	for _, p := range parts {
		have, want = have+min(p.have, p.want), want+p.want
		if p.have < p.want {
			waiting = append(waiting, fmt.Sprintf("%s %d/%d", p.what, p.have, p.want))
		}
	}
	if q := fx.awaited(); len(q) > 0 {
		waiting = append(waiting, fmt.Sprintf("%d queues not empty", len(q)))
	}
	if len(waiting) == 0 {
		return 1, "everything took effect"
	}
	if want == 0 {
		return 0, "waiting for: " + strings.Join(waiting, ", ")
	}
	return float64(have) / float64(want), "waiting for: " + strings.Join(waiting, ", ")
}

// awaited are the main and retry queues still holding messages: work not
// done yet, or a failure waiting for its next attempt, which the summary
// should not end before. A DLQ's messages are its consumer's to store.
func (fx effects) awaited() []queueDepth {
	var out []queueDepth
	for _, q := range fx.Queued {
		if q.Role == topology.RoleMain || q.Role == topology.RoleRetry {
			out = append(out, q)
		}
	}
	return out
}

// settle waits, for -wait at most, until everything the run caused took
// effect, and returns what did.
func (d *demo) settle(ctx context.Context, e env) effects {
	conn, qerr := dial(d.cfg.AMQP)
	if qerr == nil {
		defer conn.Close()
	}
	var last effects
	read := func() {
		fx := d.readEffects(ctx, conn, qerr)
		d.mu.Lock()
		last = fx
		d.mu.Unlock()
	}
	read()
	bar := startProgress(e.progress, isTerminal(e.progress), "effects", func() (float64, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return last.progress()
	})
	defer bar.stop()
	deadline := time.Now().Add(d.flags.wait)
	for !last.complete() && time.Now().Before(deadline) && sleepCtx(ctx, 500*time.Millisecond) {
		read()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return last
}

// readEffects reads back the effects of the requests the demo sent: the
// rows, keys, queue depths and mails they left when it is called.
func (d *demo) readEffects(ctx context.Context, conn *amqp.Connection, qerr error) effects {
	d.mu.Lock()
	orders, objects := append([]demoOrder(nil), d.orders...), append([]demoObject(nil), d.objects...)
	usageIDs, certified := append([]string(nil), d.usageIDs...), append([]string(nil), d.certified...)
	fx := effects{DeductWanted: d.charges, UsageAll: len(usageIDs), IdentityAll: len(certified), ObjectsAll: len(objects), BestsAll: len(d.best), ObjectStates: map[string]int{},
		MailsWanted: len(d.codesTo), QueueErr: qerr, At: time.Now()}
	best := map[[2]string]int64{}
	for k, v := range d.best {
		best[k] = v
	}
	d.mu.Unlock()
	fail := func(what string, err error) { fx.Errs = append(fx.Errs, what+": "+err.Error()) }

	paid := d.readOrders(ctx, orders, &fx, fail)
	accounts, err := store.NewAccounts(d.db).List(ctx, d.userNames())
	if err != nil {
		fail("user_account", err)
	}
	for _, a := range accounts {
		for _, u := range d.users {
			if u.Name == a.Username && a.ProExpireAt != nil && (u.ProBefore == nil || a.ProExpireAt.After(*u.ProBefore)) {
				fx.ProGranted++
			}
		}
	}
	d.readUsage(ctx, usageIDs, certified, &fx, fail)
	d.readObjects(ctx, objects, &fx)
	fx.BestsStored = d.storedBests(ctx, best, fail)
	fx.MailsWanted += fx.OrdersPaid
	fx.Mails = d.countMails(ctx, paid)
	if conn != nil {
		fx.Queued = queueDepths(conn, d.tp)
	}
	return fx
}

// readOrders counts what the paid orders did: PAID rows, receipts sent,
// recharges in the ledger, pro months. It returns the paid orders' numbers.
func (d *demo) readOrders(ctx context.Context, orders []demoOrder, fx *effects, fail func(string, error)) (paid []string) {
	var recharges []string
	for _, o := range orders {
		switch {
		case !o.Paid:
		case o.Product == order.ProductAgentRecharge:
			recharges = append(recharges, o.OutTradeNo)
		case o.Product == order.ProductProMonth:
			fx.ProMonths++
		}
		if o.Paid {
			paid = append(paid, o.OutTradeNo)
		}
		if o.Paid && o.Leftover {
			fx.Leftovers++
		}
	}
	fx.OrdersWanted = len(paid)
	if len(paid) > 0 {
		rows, err := store.NewOrders(d.db, d.rdb).List(ctx, paid)
		if err != nil {
			fail("payment_order", err)
		}
		for _, r := range rows {
			if r.Status == order.Paid {
				fx.OrdersPaid++
			}
			if r.ReceiptSentAt != nil {
				fx.ReceiptsSent++
			}
		}
	}
	if len(recharges) > 0 {
		sum, err := store.NewLedger(d.db).TotalOf(ctx, store.LedgerRecharge, recharges)
		if err != nil {
			fail("agent_ledger", err)
		}
		fx.Recharges, fx.RechargedFen = sum.Rows, sum.Fen
	}
	return paid
}

// readUsage counts the deductions, usage events and identity materials
// the demo's requests left.
func (d *demo) readUsage(ctx context.Context, usageIDs, certified []string, fx *effects, fail func(string, error)) {
	n, err := store.NewLedger(d.db).CountEntries(ctx, store.LedgerDeduct, "demo-"+d.run+"-", 0)
	if err != nil {
		fail("agent_ledger", err)
	}
	fx.DeductRows = int(n)
	if len(usageIDs) > 0 {
		n, err := store.NewUsageStats(d.db, d.rdb).CountEvents(ctx, usageIDs)
		if err != nil {
			fail("agent_usage_event", err)
		}
		fx.UsageEvents = int(n)
	}
	if len(certified) > 0 {
		n, err := store.NewIdentities(d.db, d.rdb).CountWithMaterial(ctx, certified)
		if err != nil {
			fail("identity_verification", err)
		}
		fx.Identities = int(n)
	}
}

// readObjects asks the API for each uploaded object's replication state.
func (d *demo) readObjects(ctx context.Context, objects []demoObject, fx *effects) {
	for _, o := range objects {
		var st struct {
			Replication string `json:"replication"`
		}
		a := d.api.send(ctx, apiCall{method: http.MethodGet, path: fmt.Sprintf("/v1/objects/%d", o.ID), token: o.User.Token})
		if a.Status != http.StatusOK || a.decode(&st) != nil {
			st.Replication = "unreadable (" + a.reason() + ")"
		}
		fx.ObjectStates[st.Replication]++
		if st.Replication == "done" {
			fx.Replicated++
		}
	}
}

// storedBests counts the (user, game) whose best in mini_game_score is at
// least the best score the run had accepted.
func (d *demo) storedBests(ctx context.Context, best map[[2]string]int64, fail func(string, error)) int {
	if len(best) == 0 {
		return 0
	}
	rows, err := store.NewScores(d.db, d.rdb).BestsOf(ctx, d.userNames())
	if err != nil {
		fail("mini_game_score", err)
	}
	n := 0
	for _, r := range rows {
		if want, ok := best[[2]string{r.Username, r.GameID}]; ok && r.Score >= want {
			n++
		}
	}
	return n
}

func (d *demo) userNames() []string {
	names := make([]string, len(d.users))
	for i, u := range d.users {
		names[i] = u.Name
	}
	return names
}

// queueDepth is a queue holding messages.
type queueDepth struct {
	Name     string
	Role     topology.Role
	Messages int
}

// queueDepths are the queues of tp holding messages, read with passive
// declares; a queue that cannot be read is left out.
func queueDepths(conn *amqp.Connection, tp *topology.Topology) []queueDepth {
	var out []queueDepth
	var ch *amqp.Channel
	for _, q := range tp.Queues() {
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = conn.Channel(); err != nil {
				return out
			}
		}
		info, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
		if err == nil && info.Messages > 0 {
			out = append(out, queueDepth{Name: q.Name, Role: q.Role, Messages: info.Messages})
		}
	}
	if ch != nil {
		ch.Close()
	}
	return out
}
