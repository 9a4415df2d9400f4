//go:build chaos

package e2e_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

var (
	chaosSeed   = flag.Uint64("chaos.seed", 0, "seed of the load and the fault schedule; 0: from the clock (printed)")
	chaosLong   = flag.Bool("chaos.long", false, "soak: 10 minutes of load and faults instead of 45 s")
	chaosBroker = flag.Bool("chaos.broker", true, "restart the RabbitMQ application of this machine once (rabbitmqctl stop_app/start_app)")
)

// The fault suite (doc/faults.md): the real binaries under mixed load
// across every domain while processes die and dependencies fail, then a
// drain and every invariant checked. Run it with scripts/chaos.
func TestChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (go test -tags chaos -run TestChaos ./e2e -chaos.seed=%d reproduces the schedule)", seed, seed)
	loadFor := 45 * time.Second
	if *chaosLong {
		loadFor = 10 * time.Minute
	}

	// Services, reached directly by the test and through proxies by the fleet.
	dsn := storetest.MySQLDSN(t)
	e := newFleetEnv(t, dsn)
	d := newDeps(t, map[string]string{"mysql": mysqlAddr(t, dsn), "redis": storetest.RedisAddr(), "rabbitmq": amqpAddr(t, storetest.AMQPURL())})
	rdb, err := store.OpenRedis(store.RedisConfig{Addr: storetest.RedisAddr(), KeyPrefix: e["REDIS_KEY_PREFIX"]})
	require.NoError(t, err)
	t.Cleanup(func() { storetest.Wipe(t, rdb); rdb.Close() })
	billing, payers, uploaders, players := chaosUsers("bill", 20), chaosUsers("pay", 8), chaosUsers("obj", 10), chaosUsers("game", 10)
	w := newChaosWorld(t, e, rdb, slices.Concat(billing, payers, uploaders, players))

	// The fleet's environment: every service through its proxy.
	fe := w.fleetEnv(t)
	host, port, _ := net.SplitHostPort(d.addr("redis"))
	fe["REDIS_HOST"], fe["REDIS_PORT"] = host, port
	host, port, _ = net.SplitHostPort(d.addr("rabbitmq"))
	fe["RABBITMQ_HOST"], fe["RABBITMQ_PORT"] = host, port
	fe["MYSQL_DSN"] = viaProxy(t, dsn, d.addr("mysql"))
	fleet := newChaosFleet(fe)
	fleet.start(t)

	// The load.
	l := w.load(t, fe["API_ADDR"], slices.Concat(payers, uploaders, players))
	rec := &record{http: map[string]map[int]int{}}
	loadStart := time.Now()
	ctx, stopLoad := context.WithTimeout(context.Background(), loadFor)
	defer stopLoad()
	var wg sync.WaitGroup
	stream := uint64(0)
	rng := func() *rand.Rand { stream++; return rand.New(rand.NewPCG(seed, stream)) }
	for g := range 8 { // seven charge one call at a time, one in batches
		r := rng()
		if g < 7 {
			wg.Go(func() { l.chargeLoop(ctx, r, billing, rec, g) })
		} else {
			wg.Go(func() { l.batchLoop(ctx, r, billing, rec, g) })
		}
	}
	for _, u := range payers {
		r := rng()
		wg.Go(func() { l.payLoop(ctx, r, u, rec) })
	}
	for g := range 2 {
		r := rng()
		wg.Go(func() { l.codeLoop(ctx, r, rec, g) })
	}
	for _, u := range uploaders {
		r := rng()
		wg.Go(func() { l.uploadLoop(ctx, r, u, rec) })
	}
	for _, u := range players {
		r := rng()
		wg.Go(func() { l.scoreLoop(ctx, r, u, w.uids[u], rec) })
	}

	// The faults, one after another at seeded times while the load runs.
	fr := &faultRun{t: t, d: d, rdb: rdb, workers: fleet.workers, relay: fleet.relay, reconciler: fleet.reconciler, rnd: rng(),
		log: &faultLog{}, snapshot: storetest.TakeSnapshot(t, rdb), brokerDone: !*chaosBroker}
	fr.run(ctx, loadStart, loadFor)
	wg.Wait()
	t.Logf("load over after %s; %d faults: %s", loadFor, len(fr.log.list), strings.Join(fr.log.list, "; "))

	conn, _ := storetest.AMQP(t)
	w.settle(t, conn, fleet, l, rec, seed, fr.log.list)
}

// chaosWorld is what a fault run sets up before its fleet starts: the
// schema and a price, the accounts with their opening balance, the payment
// keys and the mail sink; db, rdb and tp are how the checks reach the
// services.
type chaosWorld struct {
	e    fleetEnv // the services as the test and islectl reach them
	db   *gorm.DB
	rdb  *store.Redis
	tp   *topology.Topology
	sink *mailSink
	pk   paynotify.TestKeys
	uids map[string]int64 // user → account id
}

func newChaosWorld(t *testing.T, e fleetEnv, rdb *store.Redis, users []string) *chaosWorld {
	t.Helper()
	w := &chaosWorld{e: e, rdb: rdb, sink: newMailSink(t), uids: map[string]int64{}}
	var err error
	w.pk, err = paynotify.GenerateTestKeys()
	require.NoError(t, err)
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	out, code = islectl(t, e, "pricing", "set", "gpt-test", "-input", "1234.5678", "-output", "4000")
	require.Zero(t, code, out)
	w.db, err = store.OpenMySQL(store.MySQLConfig{DSN: e["MYSQL_DSN"]})
	require.NoError(t, err)
	t.Cleanup(func() { store.CloseMySQL(w.db) })
	w.tp, err = topology.New(topology.Config{Prefix: e["RABBITMQ_NAME_PREFIX"]})
	require.NoError(t, err)
	accounts := store.NewAccounts(w.db)
	for _, u := range users {
		a, err := accounts.Create(context.Background(), u, u+"@chaos.test", decimal.NewFromInt(5_000_000))
		require.NoError(t, err)
		w.uids[u] = int64(a.ID)
	}
	return w
}

// fleetEnv is the fleet's environment before it is pointed at its
// services: the mail sink, the payment keys, short schedules for the
// reconciler's jobs, and a free address for the API.
func (w *chaosWorld) fleetEnv(t *testing.T) fleetEnv {
	t.Helper()
	fe := maps.Clone(w.e)
	fe["RABBITMQ_PUBLISH_TIMEOUT"] = "2s"
	fe["EMAIL_MAILER_URL"] = "smtp://" + w.sink.addr + "?tls=none&from=no-reply%40isle.test"
	fe["PAYMENT_ALIPAY_PUBLIC_KEY"], fe["PAYMENT_ALIPAY_APP_ID"] = w.pk.AlipayPublicPEM, chaosAlipayApp
	fe["API_TRUSTED_PROXIES"] = "127.0.0.1" // the load connects from loopback, as through a local proxy (doc/edge.md)
	fe["API_ADDR"] = freeAddr(t)
	fe["GAME_SCORE_SUBMIT_PER_MINUTE"] = "1000"
	fe["BALANCE_SYNC_SCHEDULE"] = "@every 5s"
	fe["BALANCE_SYNC_PENDING_AGE"] = "10s"
	fe["OBJECT_REPLICATION_BACKFILL_ENABLED"] = "true"
	fe["OBJECT_REPLICATION_BACKFILL_INTERVAL_MS"] = "2000"
	fe["OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS"] = "20000"
	fe["WORKER_SHUTDOWN_TIMEOUT"] = "10s"
	return fe
}

// load is the clients' side: a token for each of users, the service's
// token for charges, an admin's for reading objects.
func (w *chaosWorld) load(t *testing.T, apiAddr string, users []string) *loadEnv {
	t.Helper()
	tokens := map[string]string{}
	for _, u := range users {
		tok, code := islectl(t, w.e, "token", "-user", u)
		require.Zero(t, code, tok)
		tokens[u] = strings.TrimSpace(tok)
	}
	svc, code := islectl(t, w.e, "token", "-user", "agent-gateway", "-role", "service")
	require.Zero(t, code, svc)
	admin, code := islectl(t, w.e, "token", "-user", "chaos-ops", "-role", "admin")
	require.Zero(t, code, admin)
	return &loadEnv{addr: apiAddr, tokens: tokens, svc: strings.TrimSpace(svc), admin: strings.TrimSpace(admin), keys: w.pk,
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// chaosFleet is the supervised binaries of a fault run: one of each, and a
// worker per kind of work.
type chaosFleet struct {
	api, relay, reconciler *member
	workers                []*member
}

func newChaosFleet(fe fleetEnv) *chaosFleet {
	worker := func(kind, handlers string) *member {
		return &member{name: "worker " + kind, bin: "worker", args: []string{"-handlers", handlers}, env: fe, ready: "worker started"}
	}
	return &chaosFleet{
		api:        &member{name: "api", bin: "api", env: fe, ready: "api started"},
		relay:      &member{name: "relay", bin: "relay", env: fe, ready: "relay started"},
		reconciler: &member{name: "reconcile", bin: "reconcile", env: fe, ready: "reconcile started"},
		workers: []*member{
			worker("billing", "agent-billing,agent-usage-stats"),
			worker("payments", "payment-notify,payment-receipt,email"),
			worker("objects", "object-replication,identity-material"),
			worker("game", "mini-game-score"),
			worker("dlq", "dlq"),
		},
	}
}

func (f *chaosFleet) members() []*member {
	return slices.Concat([]*member{f.api, f.relay, f.reconciler}, f.workers)
}

func (f *chaosFleet) start(t *testing.T) {
	t.Helper()
	for _, m := range f.members() {
		m.start(t)
	}
}

// settle ends a fault run once its load is over: every process up, every
// queue (asked on conn) and outbox drained, the reconciler's jobs run once
// more, then every invariant checked; it prints the table and fails the
// test on a lost or doubled effect or on money that does not add up.
func (w *chaosWorld) settle(t *testing.T, conn *amqp.Connection, fleet *chaosFleet, l *loadEnv, rec *record, seed uint64, faults []string) {
	t.Helper()
	for _, m := range fleet.members() {
		require.True(t, m.alive(), "%s is running", m.name)
	}
	loadEnded := time.Now()
	drain(t, conn, w.tp, w.db, 3*time.Minute)
	// A replication task stuck by a fault is republished once it is older
	// than the backfill's threshold (more than the 15 s retry delay).
	time.Sleep(time.Until(loadEnded.Add(17 * time.Second)))
	rc := maps.Clone(fleet.reconciler.env)
	maps.Copy(rc, fleetEnv{"BALANCE_SYNC_PENDING_AGE": "1ms", "BALANCE_SYNC_CONFIRM_DELAY": "0", "BALANCE_SYNC_QUIET_PERIOD": "1ms",
		"OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS": "16000"})
	for _, job := range []string{"balance-sync", "replication-backfill"} {
		t.Log(strings.TrimSpace(reconcileOnce(t, rc, job)))
	}
	drain(t, conn, w.tp, w.db, 2*time.Minute)
	final := reconcileOnce(t, rc, "balance-sync")
	t.Log(strings.TrimSpace(final))

	table := checkChaos(t, l, rec, w.sink, w.db, w.rdb, w.tp, w.uids)
	var adj struct {
		N   int
		Sum decimal.Decimal
	}
	require.NoError(t, w.db.Raw("SELECT COUNT(*) AS n, COALESCE(SUM(amount_fen), 0) AS sum FROM agent_ledger WHERE kind = 'ADJUST'").Scan(&adj).Error)
	result := "?"
	if m := regexp.MustCompile(`"result":(\{[^}]*\})`).FindStringSubmatch(final); m != nil {
		result = m[1]
	}
	table.row("reconciler", 0, 0, fmt.Sprintf("ADJUST rows %d (Σ %s fen); last balance-sync %s", adj.N, adj.Sum.StringFixed(8), result))
	table.faults = faults
	table.seed = seed
	table.print(os.Stdout)
	require.Zero(t, table.lost, "lost accepted requests")
	require.Zero(t, table.duplicated, "duplicated effects")
	require.Empty(t, table.moneyErrors, "money conserved for every user")
}

// faultRun injects the fault suite's faults, one after another at seeded
// times, until ctx ends; RabbitMQ restarts once, after two thirds of the
// load at the latest.
type faultRun struct {
	t                 *testing.T
	d                 *deps
	rdb               *store.Redis
	workers           []*member
	relay, reconciler *member
	rnd               *rand.Rand
	log               *faultLog
	snapshot          *storetest.Snapshot
	brokerDone        bool
}

var faultKinds = []string{"kill", "kill", "term", "relay", "reconcile", "mysql", "redis-loss", "redis-old", "latency", "reset", "halfopen", "broker"}

func (fr *faultRun) run(ctx context.Context, loadStart time.Time, loadFor time.Duration) {
	for ctx.Err() == nil {
		sleep(ctx, time.Duration(1500+fr.rnd.IntN(2500))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		kind := faultKinds[fr.rnd.IntN(len(faultKinds))]
		if kind == "broker" && fr.brokerDone {
			kind = "kill"
		}
		if !fr.brokerDone && time.Since(loadStart) > loadFor*2/3 {
			kind = "broker" // once per run, whatever the draw
		}
		fr.inject(kind)
	}
}

// inject brings about one fault of kind and ends it.
func (fr *faultRun) inject(kind string) {
	t, d, frnd, faults := fr.t, fr.d, fr.rnd, fr.log
	switch kind {
	case "kill", "term":
		m := fr.workers[frnd.IntN(len(fr.workers))]
		sig := map[string]syscall.Signal{"kill": syscall.SIGKILL, "term": syscall.SIGTERM}[kind]
		faults.add(fmt.Sprintf("%s %s", sig, m.name))
		m.kill(t, sig, time.Duration(frnd.IntN(1500))*time.Millisecond)
	case "relay":
		faults.add("SIGKILL relay")
		fr.relay.kill(t, syscall.SIGKILL, time.Duration(frnd.IntN(1500))*time.Millisecond)
	case "reconcile":
		faults.add("SIGKILL reconcile")
		fr.reconciler.kill(t, syscall.SIGKILL, time.Duration(frnd.IntN(1500))*time.Millisecond)
	case "mysql":
		down := time.Duration(1000+frnd.IntN(3000)) * time.Millisecond
		faults.add(fmt.Sprintf("MySQL unreachable for %s", down))
		d.down("mysql")
		time.Sleep(down)
		d.up(t, "mysql")
	case "redis-loss":
		faults.add("Redis restarts without its data")
		d.down("redis")
		storetest.Wipe(t, fr.rdb)
		d.up(t, "redis")
	case "redis-old":
		faults.add("Redis restarts from an older snapshot")
		d.down("redis")
		fr.snapshot.Restore(t)
		d.up(t, "redis")
		fr.snapshot = storetest.TakeSnapshot(t, fr.rdb)
	case "latency", "reset", "halfopen":
		fr.degrade(kind)
	case "broker":
		fr.brokerDone = true
		faults.add("RabbitMQ restarts (rabbitmqctl stop_app, start_app)")
		require.NoError(t, brokerRestart(t, time.Duration(500+frnd.IntN(1500))*time.Millisecond))
	}
}

// degrade slows, resets or stalls the connections to one dependency for a
// while (toxiproxy's latency, reset_peer and timeout toxics).
func (fr *faultRun) degrade(kind string) {
	t, d, frnd := fr.t, fr.d, fr.rnd
	dep := []string{"mysql", "redis", "rabbitmq"}[frnd.IntN(3)]
	attrs, what := `{"latency":200,"jitter":100}`, "latency 200±100 ms"
	toxic := "latency"
	switch kind {
	case "reset":
		toxic, attrs, what = "reset_peer", `{"timeout":500}`, "connections reset"
	case "halfopen":
		toxic, attrs, what = "timeout", `{"timeout":0}`, "half-open connections (data stops, nothing closes)"
	}
	hold := time.Duration(1000+frnd.IntN(2000)) * time.Millisecond
	fr.log.add(fmt.Sprintf("%s: %s for %s", dep, what, hold))
	d.toxic(t, dep, toxic, attrs)
	time.Sleep(hold)
	d.clear(dep)
	if kind != "latency" {
		d.down(dep) // the stalled connections are closed, as keepalives would
		d.up(t, dep)
	}
}

type faultLog struct {
	mu   sync.Mutex
	list []string
}

func (f *faultLog) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, s)
}

// reconcileOnce runs `reconcile -once job`; while the job's lock is held it
// refuses, and is asked again: by the fleet's reconciler running the same
// job, or for up to the lock's minute by one the schedule SIGKILLed while
// it ran the job (seed 11).
func reconcileOnce(t *testing.T, e fleetEnv, job string) string {
	t.Helper()
	for giveUp := time.Now().Add(90 * time.Second); ; {
		p := start(t, e, "reconcile", "-once", job)
		select {
		case err := <-p.done:
			if err != nil && strings.Contains(p.output(), "running elsewhere") && time.Now().Before(giveUp) {
				time.Sleep(250 * time.Millisecond)
				continue
			}
			require.NoError(t, err, p.output())
		case <-time.After(2 * time.Minute):
			t.Fatalf("reconcile -once %s did not finish:\n%s", job, p.output())
		}
		return p.output()
	}
}

// chaosTable is the suite's verdict.
type chaosTable struct {
	seed        uint64
	faults      []string
	rows        [][4]string // domain, accepted, effects, notes
	lost        int
	duplicated  int
	moneyErrors []string
	dlq         map[string]int
}

func (c *chaosTable) row(domain string, accepted, effects int, note string) {
	c.rows = append(c.rows, [4]string{domain, fmt.Sprint(accepted), fmt.Sprint(effects), note})
}

func (c *chaosTable) print(w *os.File) {
	fmt.Fprintf(w, "\nIsle fault suite, seed %d, %d faults\n", c.seed, len(c.faults))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "domain\taccepted\teffects\tnotes")
	for _, r := range c.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3])
	}
	fmt.Fprintf(tw, "lost accepted requests\t%d\t\t\n", c.lost)
	fmt.Fprintf(tw, "duplicated effects\t%d\t\t\n", c.duplicated)
	money := "every user: Redis = MySQL = Σ ledger, to 1e-8"
	if len(c.moneyErrors) > 0 {
		money = strings.Join(c.moneyErrors, "; ")
	}
	fmt.Fprintf(tw, "money conserved\t\t\t%s\n", money)
	var dl []string
	for k, n := range c.dlq {
		dl = append(dl, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(dl)
	fmt.Fprintf(tw, "DLQ rows\t%d\t\t%s\n", len(dl), strings.Join(dl, "; "))
	_ = tw.Flush()
	fmt.Fprintf(w, "faults: %s\n", strings.Join(c.faults, "; "))
}

// checkChaos checks every invariant on what the load was told and what
// the fleet left, and returns the table.
func checkChaos(t *testing.T, l *loadEnv, rec *record, sink *mailSink, db *gorm.DB, rdb *store.Redis, tp *topology.Topology,
	uids map[string]int64) *chaosTable {
	t.Helper()
	k := chaosCheck{t: t, l: l, rec: rec, db: db, rdb: rdb, tp: tp, uids: uids, c: &chaosTable{dlq: map[string]int{}}}
	k.charges()
	k.money()
	distinct, deliveries := sink.mails()
	k.payments(sink, distinct, deliveries)
	k.codes(distinct)
	k.objects()
	k.scores()
	k.deadMessages()
	return k.c
}

// chaosCheck holds what a run's invariants are checked against; each of
// its methods checks one domain and adds its row to c.
type chaosCheck struct {
	t    *testing.T
	l    *loadEnv
	rec  *record
	db   *gorm.DB
	rdb  *store.Redis
	tp   *topology.Topology
	uids map[string]int64
	c    *chaosTable
}

func (k chaosCheck) charges() {
	t, db, c, rec := k.t, k.db, k.c, k.rec
	// Billing, alone and in batches: a 200 is one DEDUCT row with what the
	// client was told; a refusal charged nothing; an unanswered request, or
	// one answered that its outcome is unknown, may be either. A batch
	// resends only charges answered 200, so an id sent twice may be in the
	// ledger when any of its answers says it may.
	var rows []store.LedgerEntry
	require.NoError(t, db.Select("username", "entry_id", "amount_fen", "shortfall_fen").Where("kind = 'DEDUCT'").Find(&rows).Error)
	ledger := make(map[[2]string]store.LedgerEntry, len(rows)) // one at most: the ledger's key is (user, kind, entry id)
	for _, r := range rows {
		ledger[[2]string{r.Username, r.EntryID}] = r
	}
	mayCharge := map[[2]string]bool{}
	for _, ch := range rec.charges {
		if ch.status == http.StatusOK || ch.status == 0 || ch.unknown {
			mayCharge[[2]string{ch.user, ch.id}] = true
		}
	}
	type tally struct{ accepted, effects, refusedCharged, unknown, resent int }
	var alone, batched tally
	sent := map[[2]string]bool{}
	for _, ch := range rec.charges {
		tl := &alone
		if ch.batch {
			tl = &batched
		}
		key := [2]string{ch.user, ch.id}
		if sent[key] {
			tl.resent++
		}
		sent[key] = true
		row, charged := ledger[key]
		switch {
		case ch.status == http.StatusOK:
			tl.accepted++
			if !charged {
				c.lost++
				t.Errorf("charge %s of %s answered 200 (%s; in a batch: %v) has no ledger row", ch.id, ch.user, ch.deducted, ch.batch)
				continue
			}
			tl.effects++
			if got := row.Deducted().StringFixed(8); got != ch.deducted {
				c.moneyErrors = append(c.moneyErrors, fmt.Sprintf("%s/%s told %s, ledger %s", ch.user, ch.id, ch.deducted, got))
			}
		case ch.unknown:
			tl.unknown++
		case ch.status != 0 && charged && !mayCharge[key]:
			tl.refusedCharged++
			c.duplicated++
			t.Errorf("charge %s of %s answered %d (in a batch: %v) but charged", ch.id, ch.user, ch.status, ch.batch)
		}
	}
	c.row("billing charges", alone.accepted, alone.effects, fmt.Sprintf("answers %v; refused yet charged %d; outcome unknown %d",
		rec.http["billing"], alone.refusedCharged, alone.unknown))
	c.row("billing batch items", batched.accepted, batched.effects, fmt.Sprintf("items %v in batches answered %v; resent after a 200 %d; refused yet charged %d; outcome unknown %d",
		rec.http["billing batch items"], rec.http["billing batches"], batched.resent, batched.refusedCharged, batched.unknown))
}

func (k chaosCheck) money() {
	ctx, db, rdb, c := context.Background(), k.db, k.rdb, k.c
	uids := k.uids
	t := k.t
	// Money, every user: Redis = MySQL balance = Σ of the ledger, never negative.
	for u := range uids {
		var row struct{ Balance, Ledger decimal.Decimal }
		require.NoError(t, db.Raw(`SELECT balance_fen AS balance, (SELECT COALESCE(SUM(amount_fen), 0) FROM agent_ledger WHERE username = ?) AS ledger
			FROM user_account WHERE username = ?`, u, u).Scan(&row).Error)
		hot, err := store.NewBalances(nil, rdb).Balance(ctx, u)
		switch {
		case err != nil && !errors.Is(err, store.ErrBalanceMissing): // missing: the next request initialises it from MySQL
			c.moneyErrors = append(c.moneyErrors, fmt.Sprintf("%s: Redis: %v", u, err))
		case !row.Balance.Equal(row.Ledger):
			c.moneyErrors = append(c.moneyErrors, fmt.Sprintf("%s: MySQL %s, Σ ledger %s", u, row.Balance, row.Ledger))
		case err == nil && !hot.Equal(row.Balance):
			c.moneyErrors = append(c.moneyErrors, fmt.Sprintf("%s: Redis %s, MySQL %s", u, hot, row.Balance))
		case row.Balance.IsNegative():
			c.moneyErrors = append(c.moneyErrors, fmt.Sprintf("%s: negative %s", u, row.Balance))
		}
	}

}

func (k chaosCheck) payments(sink *mailSink, distinct, deliveries map[string]int) {
	t, db, c, rec := k.t, k.db, k.c, k.rec
	// Payments: an accepted callback is a PAID order with one RECHARGE row
	// and one receipt mail; any paid order has exactly one of each.
	accepted, effects := 0, 0
	receipts, resent := 0, 0
	for _, p := range rec.paid {
		var o store.PaymentOrder
		require.NoError(t, db.Where("out_trade_no = ?", p.order).Take(&o).Error)
		var n int64
		require.NoError(t, db.Model(&store.LedgerEntry{}).Where("username = ? AND kind = 'RECHARGE' AND entry_id = ?", p.user, p.order).Count(&n).Error)
		if p.accepted {
			accepted++
		}
		if o.Status != order.Paid {
			if p.accepted {
				c.lost++
				t.Errorf("order %s: callback answered success, order %s", p.order, o.Status)
			}
			continue
		}
		effects++
		if n != 1 {
			c.duplicated += int(max(n-1, 0))
			c.lost += int(1 - min(n, 1))
			t.Errorf("paid order %s has %d RECHARGE rows", p.order, n)
		}
		if o.ReceiptSentAt != nil {
			receipts++
		}
	}
	// Each payer's receipts: one distinct mail per paid order.
	byPayer := map[string]int{}
	for _, p := range rec.paid {
		var o store.PaymentOrder
		_ = db.Where("out_trade_no = ?", p.order).Take(&o).Error
		if o.Status == order.Paid {
			byPayer[p.email]++
		}
	}
	for email, want := range byPayer {
		// The payer also receives nothing else: only receipts go to @chaos.test payers.
		if got := distinct[email]; got != want {
			if got > want {
				c.duplicated += got - want
			} else {
				c.lost += want - got
			}
			t.Errorf("%s: %d paid orders, %d distinct receipt mails", email, want, got)
			for _, p := range rec.paid {
				if p.email == email {
					c.explainReceipt(t, db, sink, p.order)
				}
			}
		}
		resent += deliveries[email] - distinct[email]
	}
	c.row("payments (recharge callbacks)", accepted, effects, fmt.Sprintf("receipts recorded %d; same receipt delivered again %d (one Message-ID); orders answered %v; callbacks %v",
		receipts, resent, rec.http["payments"], rec.http["payment callbacks"]))

}

func (k chaosCheck) codes(distinct map[string]int) {
	t, c, rec := k.t, k.c, k.rec
	// Email codes: one mail per accepted code.
	accepted, effects := 0, 0
	for _, cd := range rec.codes {
		if !cd.accepted {
			continue
		}
		accepted++
		switch n := distinct[cd.email]; n {
		case 1:
			effects++
		case 0:
			c.lost++
			t.Errorf("code for %s accepted, never mailed", cd.email)
		default:
			effects++
			c.duplicated += n - 1
		}
	}
	c.row("email codes", accepted, effects, fmt.Sprintf("answers %v", rec.http["email"]))

}

func (k chaosCheck) objects() {
	t, c, rec, l := k.t, k.c, k.rec, k.l
	// Objects: each stored object replicated, byte for byte.
	effects := 0
	for _, u := range rec.uploads {
		state, replica := l.objectState(u.user, u.id)
		if state != "done" || replica == "" {
			c.lost++
			t.Errorf("object %d of %s: replication %s", u.id, u.user, state)
			continue
		}
		b, err := os.ReadFile(strings.TrimPrefix(replica, "file://"))
		if err != nil || sha256.Sum256(b) != u.sum {
			c.lost++
			t.Errorf("object %d: replica %s differs (%v)", u.id, replica, err)
			continue
		}
		effects++
	}
	c.row("objects replicated and verified", len(rec.uploads), effects, fmt.Sprintf("answers %v", rec.http["objects"]))

}

func (k chaosCheck) scores() {
	ctx, t, db, rdb, c, rec, uids := context.Background(), k.t, k.db, k.rdb, k.c, k.rec, k.uids
	// Scores: each player's best in MySQL is at least their best accepted
	// score and one they submitted; the leaderboard equals MySQL.
	best, sent := map[string]int64{}, map[string]map[int64]bool{}
	accepted := 0
	for _, s := range rec.scores {
		if sent[s.user] == nil {
			sent[s.user] = map[int64]bool{}
		}
		sent[s.user][s.score] = true
		if s.accepted {
			accepted++
			best[s.user] = max(best[s.user], s.score)
		}
	}
	scores := store.NewScores(db, rdb)
	board, _, err := scores.Leaderboard(ctx, "2048", 200)
	require.NoError(t, err)
	onBoard := map[int64]int64{}
	for _, e := range board {
		onBoard[e.UserID] = e.Score
	}
	effects := 0
	for u, want := range best {
		row, err := scores.Best(ctx, "2048", uids[u])
		switch {
		case err != nil:
			c.lost++
			t.Errorf("%s: best %d accepted, none in MySQL: %v", u, want, err)
		case row.Score < want || !sent[u][row.Score]:
			c.lost++
			t.Errorf("%s: best accepted %d, MySQL %d", u, want, row.Score)
		case onBoard[uids[u]] != row.Score:
			c.lost++
			t.Errorf("%s: MySQL %d, leaderboard %d", u, row.Score, onBoard[uids[u]])
		default:
			effects++
		}
	}
	c.row("scores (submissions; players whose best and board are right)", accepted, effects, fmt.Sprintf("%d players; answers %v", len(best), rec.http["scores"]))

}

func (k chaosCheck) deadMessages() {
	ctx, t, db, c, tp := context.Background(), k.t, k.db, k.c, k.tp
	// Dead messages and why.
	for _, dom := range tp.Domains() {
		if dom.DLQTable == "" {
			continue
		}
		var rows []struct {
			LastError *string
			N         int
		}
		require.NoError(t, db.Raw("SELECT last_error, COUNT(*) AS n FROM "+dom.DLQTable+" WHERE queue = ? GROUP BY last_error", dom.DLQ).Scan(&rows).Error)
		for _, r := range rows {
			why := "?"
			if r.LastError != nil {
				why = clipText(*r.LastError, 80)
			}
			c.dlq[dom.Name+" ("+why+")"] += r.N
		}
	}
	// Every outbox row the load caused can be published: a parked one is a
	// message that never left.
	parked, counts, err := store.ParkedOutbox(ctx, db, 10)
	require.NoError(t, err)
	for _, table := range store.OutboxTables {
		c.lost += counts[table]
	}
	for _, r := range parked {
		t.Errorf("outbox row parked: %s %d (%s): %s", r.Table, r.ID, r.What, r.LastError)
	}
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// explainReceipt reports, for a paid order whose receipt mail never came,
// where the receipt stands: the order's record of it and its outbox row.
func (c *chaosTable) explainReceipt(t *testing.T, db *gorm.DB, sink *mailSink, outTradeNo string) {
	t.Helper()
	if sink.has("receipt-" + outTradeNo) {
		return
	}
	var o store.PaymentOrder
	_ = db.Where("out_trade_no = ?", outTradeNo).Take(&o).Error
	if o.Status != order.Paid {
		return
	}
	var rows []store.OutboxMessage
	_ = db.Where("domain = ? AND payload LIKE ?", topology.DomainPaymentReceipt, "%"+outTradeNo+"%").Find(&rows).Error
	t.Logf("no receipt mail for paid order %s: paid_at %v, receipt_sent_at %v, now %s", outTradeNo, orNil(o.PaidAt), orNil(o.ReceiptSentAt), time.Now().UTC().Format(time.RFC3339Nano))
	for _, r := range rows {
		t.Logf("  outbox %d: created %s, attempts %d, available_at %s, claimed_by %v, published_at %v, last_error %v",
			r.ID, r.CreatedAt.Format(time.RFC3339Nano), r.Attempts, r.AvailableAt.Format(time.RFC3339Nano), orNil(r.ClaimedBy), orNil(r.PublishedAt), orNil(r.LastError))
	}
	if len(rows) == 0 {
		t.Logf("  no outbox row")
	}
}

func orNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
