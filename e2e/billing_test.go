package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// billingFleet is a migrated fleet with priced models and users, its api
// running, and handles on its database and Redis.
type billingFleet struct {
	env   fleetEnv
	db    *gorm.DB
	rdb   *store.Redis
	tp    *topology.Topology
	conn  *amqp.Connection
	addr  string
	token string
}

// newBillingFleet starts the api of a fleet with users (name: opening
// balance); apiEnv, if given, edits the api's environment only.
func newBillingFleet(t *testing.T, users map[string]string, apiEnv ...func(fleetEnv)) *billingFleet {
	t.Helper()
	dsn := storetest.MySQLDSN(t)
	e := newFleetEnv(t, dsn)
	e["BALANCE_SYNC_QUIET_PERIOD"] = "1ms"
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	out, code = islectl(t, e, "pricing", "set", "gpt-test", "-input", "1234567.89", "-output", "2000000")
	require.Zero(t, code, out)
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { store.CloseMySQL(db) })
	for u, bal := range users {
		_, err := store.NewAccounts(db).Create(context.Background(), u, "", decimal.RequireFromString(bal))
		require.NoError(t, err)
	}
	rdb, err := store.OpenRedis(store.RedisConfig{Addr: storetest.RedisAddr(), KeyPrefix: e["REDIS_KEY_PREFIX"]})
	require.NoError(t, err)
	t.Cleanup(func() { storetest.Wipe(t, rdb); rdb.Close() })
	tp, err := topology.New(topology.Config{Prefix: e["RABBITMQ_NAME_PREFIX"]})
	require.NoError(t, err)
	conn, err := amqp.Dial(storetest.AMQPURL())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ae := maps.Clone(e)
	for _, edit := range apiEnv {
		edit(ae)
	}
	api := start(t, ae, "api")
	line := api.waitFor(t, 30*time.Second, "api started")
	tok, code := islectl(t, e, "token", "-user", "agent-gateway", "-role", "service")
	require.Zero(t, code, tok)
	return &billingFleet{env: e, db: db, rdb: rdb, tp: tp, conn: conn,
		addr: regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(line)[1], token: strings.TrimSpace(tok)}
}

type usageAnswer struct {
	RequestID   string `json:"requestId"`
	DeductedFen string `json:"deductedFen"`
	BalanceFen  string `json:"balanceFen"`
	Replayed    bool   `json:"replayed"`
}

// usage posts one /v1/agent/usage and returns the status and answer.
func (f *billingFleet) usage(t *testing.T, client *http.Client, user, id string, input int) (int, usageAnswer) {
	t.Helper()
	body := fmt.Sprintf(`{"requestId":%q,"username":%q,"modelName":"gpt-test","inputTokens":%d,"outputTokens":0}`, id, user, input)
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/v1/agent/usage", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var a usageAnswer
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	}
	return resp.StatusCode, a
}

func (f *billingFleet) depth(t *testing.T, domain string) int {
	t.Helper()
	d, _ := f.tp.Domain(domain)
	return storetest.QueueDepth(t, f.conn, d.Queue)
}

// reconcileOnce runs `reconcile -once JOB` and returns its standard output.
func (f *billingFleet) reconcileOnce(t *testing.T, job string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "reconcile"), "-once", job)
	cmd.Env = f.env.list()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s\n%s", stdout.String(), stderr.String())
	return stdout.String()
}

// 2,000 concurrent usage requests over 50 users, some asking for more than
// their balance, through the real API, broker and workers; after the queues
// drain and one reconcile pass, the ledger holds exactly what clients were
// told, and Redis = MySQL for every user.
func TestBillingEndToEnd(t *testing.T) {
	t.Parallel()
	users := map[string]string{}
	for i := range 50 {
		users[fmt.Sprintf("user%02d", i)] = decimal.New(int64(rand.IntN(10000)), -2).String() // 0..100 fen
	}
	f := newBillingFleet(t, users)
	f.env["WORKER_CONCURRENCY_BY_DOMAIN"] = "agent-billing=16,agent-usage-stats=8"
	worker := start(t, f.env, "worker", "-handlers", "agent-billing,agent-usage-stats")
	worker.waitFor(t, 30*time.Second, "worker started")

	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	var mu sync.Mutex
	deducted := map[string]decimal.Decimal{}
	statuses := map[int]int{}
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range jobs {
				user := names[i%len(names)]
				status, a := f.usage(t, client, user, fmt.Sprintf("req-%04d", i), 1+i%4) // 1.23..4.94 fen each
				mu.Lock()
				statuses[status]++
				if status == http.StatusOK {
					deducted[user] = deducted[user].Add(decimal.RequireFromString(a.DeductedFen))
				}
				mu.Unlock()
			}
		})
	}
	for i := range 2000 {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("answers: %v", statuses)
	require.Equal(t, 2000, statuses[http.StatusOK]+statuses[http.StatusPaymentRequired], "only 200 and 402: %v", statuses)
	require.Positive(t, statuses[http.StatusPaymentRequired], "some users ran out")

	require.Eventually(t, func() bool {
		return f.depth(t, topology.DomainAgentBilling) == 0 && f.depth(t, topology.DomainAgentUsageStats) == 0
	}, 2*time.Minute, 200*time.Millisecond, "queues did not drain")
	require.Eventually(t, func() bool {
		n, _ := f.rdb.Client(keys.DBAgentBilling).Keys(context.Background(), f.rdb.Keys().Pattern(keys.AgentPending)).Result()
		return len(n) == 0
	}, 30*time.Second, 100*time.Millisecond, "pending deductions left")
	out := f.reconcileOnce(t, "balance-sync")
	require.Regexp(t, `^balance-sync: users scanned 50, pending applied 0, pending cleared 0, refunded 0, usage counted 0, settled 0, drift found 0, adjustments 0, rebuilt 0, deferred 0, busy \d+, late cleaned 0, unreadable 0, errors 0\n$`, out)

	total := decimal.Zero
	for u, want := range deducted {
		total = total.Add(want)
		var row struct {
			Balance decimal.Decimal
			Deduct  decimal.Decimal
		}
		require.NoError(t, f.db.Raw(`SELECT balance_fen AS balance,
			-COALESCE((SELECT SUM(amount_fen) FROM agent_ledger WHERE username = ? AND kind = 'DEDUCT'), 0) AS deduct
			FROM user_account WHERE username = ?`, u, u).Scan(&row).Error)
		require.True(t, row.Deduct.Equal(want), "%s: ledger %s, told clients %s", u, row.Deduct, want)
		redis, err := store.NewBalances(nil, f.rdb).Balance(context.Background(), u)
		require.NoError(t, err)
		require.True(t, redis.Equal(row.Balance), "%s: Redis %s, MySQL %s", u, redis, row.Balance)
		require.False(t, row.Balance.IsNegative())
		require.True(t, row.Balance.Equal(decimal.RequireFromString(users[u]).Sub(want)), "%s: opening - deducted", u)
	}
	var ledgerTotal decimal.Decimal
	require.NoError(t, f.db.Raw("SELECT -SUM(amount_fen) FROM agent_ledger WHERE kind = 'DEDUCT'").Scan(&ledgerTotal).Error)
	require.True(t, ledgerTotal.Equal(total), "Σ ledger deductions %s, Σ deductedFen %s", ledgerTotal, total)
	t.Logf("Σ deductedFen told to clients %s = Σ ledger deductions %s, over %d users; Redis = MySQL for each", total, ledgerTotal, len(deducted))
	var shortfall decimal.Decimal
	require.NoError(t, f.db.Raw("SELECT COALESCE(SUM(shortfall_fen), 0) FROM agent_ledger").Scan(&shortfall).Error)
	require.True(t, shortfall.IsZero())
	var requests int64
	require.Eventually(t, func() bool {
		require.NoError(t, f.db.Raw("SELECT COALESCE(SUM(request_count), 0) FROM agent_usage_stats").Scan(&requests).Error)
		return requests >= int64(statuses[http.StatusOK])
	}, 30*time.Second, 100*time.Millisecond)
	require.EqualValues(t, statuses[http.StatusOK], requests, "usage counted once per charged request")
}

// The same request id sent twice, and many times at once, deducts once.
func TestSameRequestIDDeductsOnce(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, map[string]string{"dup": "100"})
	client := &http.Client{Timeout: 10 * time.Second}
	status, first := f.usage(t, client, "dup", "same-1", 10)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "12.34567890", first.DeductedFen)
	status, again := f.usage(t, client, "dup", "same-1", 10)
	require.Equal(t, http.StatusOK, status)
	require.True(t, again.Replayed)
	require.Equal(t, first.DeductedFen, again.DeductedFen)

	var wg sync.WaitGroup
	var replays sync.Map
	for i := range 20 {
		wg.Go(func() {
			status, a := f.usage(t, client, "dup", "same-2", 10)
			require.Equal(t, http.StatusOK, status)
			replays.Store(i, a.Replayed)
		})
	}
	wg.Wait()
	fresh := 0
	replays.Range(func(_, v any) bool {
		if !v.(bool) {
			fresh++
		}
		return true
	})
	require.Equal(t, 1, fresh, "one of 20 concurrent requests deducted")
	bal, err := store.NewBalances(nil, f.rdb).Balance(context.Background(), "dup")
	require.NoError(t, err)
	require.Equal(t, "75.30864220", bal.StringFixed(8), "100 - 2 × 12.3456789")
	var msgs int
	d, _ := f.tp.Domain(topology.DomainAgentBilling)
	require.Eventually(t, func() bool { msgs = f.depth(t, topology.DomainAgentBilling); return msgs >= 2 }, 5*time.Second, 50*time.Millisecond)
	require.NotEmpty(t, d.Queue)

	// The consumer applies each deduction once, whatever the number of messages.
	w := start(t, f.env, "worker", "-handlers", "agent-billing")
	w.waitFor(t, 30*time.Second, "worker started")
	// (A queue's depth counts ready messages only: wait for the ledger.)
	var rows int64
	require.Eventually(t, func() bool {
		require.NoError(t, f.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE username = 'dup' AND kind = 'DEDUCT'").Scan(&rows).Error)
		return rows >= 2 && f.depth(t, topology.DomainAgentBilling) == 0
	}, 20*time.Second, 50*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // duplicates still in flight would show now
	require.NoError(t, f.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE username = 'dup' AND kind = 'DEDUCT'").Scan(&rows).Error)
	require.EqualValues(t, 2, rows)
	require.Eventually(t, func() bool {
		u, err := store.NewAccounts(f.db).Get(context.Background(), "dup")
		require.NoError(t, err)
		return u.BalanceFen.StringFixed(8) == "75.30864220"
	}, 5*time.Second, 50*time.Millisecond)
}

// A deduction whose message is lost (the test purges the queue) is charged
// by `reconcile -once balance-sync`, exactly once.
func TestLostDeductionMessageIsChargedByTheReconciler(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, map[string]string{"lost": "50"})
	f.env["BALANCE_SYNC_PENDING_AGE"] = "1ms"
	client := &http.Client{Timeout: 10 * time.Second}
	status, a := f.usage(t, client, "lost", "gone-1", 4)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "4.93827156", a.DeductedFen)
	d, _ := f.tp.Domain(topology.DomainAgentBilling)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	purged, err := ch.QueuePurge(d.Queue, false)
	require.NoError(t, err)
	require.Equal(t, 1, purged, "the deduction message is lost")
	ch.Close()

	out := f.reconcileOnce(t, "balance-sync")
	require.Contains(t, out, "pending applied 1")
	out = f.reconcileOnce(t, "balance-sync")
	require.Contains(t, out, "pending applied 0")
	require.Contains(t, out, "drift found 0")
	u, err := store.NewAccounts(f.db).Get(context.Background(), "lost")
	require.NoError(t, err)
	require.Equal(t, "45.06172844", u.BalanceFen.StringFixed(8), "charged once")
	bal, err := store.NewBalances(nil, f.rdb).Balance(context.Background(), "lost")
	require.NoError(t, err)
	require.Equal(t, "45.06172844", bal.StringFixed(8))

	// -json prints the result with the names the logs use, and the logs
	// give durations as text, not integer nanoseconds.
	jsonOut := exec.Command(filepath.Join(binDir, "reconcile"), "-once", "balance-sync", "-json")
	jsonOut.Env = f.env.list()
	var stderr bytes.Buffer
	jsonOut.Stderr = &stderr
	raw, err := jsonOut.Output()
	require.NoError(t, err)
	var printed struct {
		Job    string         `json:"job"`
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.Unmarshal(raw, &printed))
	require.Equal(t, "balance-sync", printed.Job)
	require.EqualValues(t, 1, printed.Result["users_scanned"], "%s", raw)
	var finished struct {
		Msg    string         `json:"msg"`
		Took   any            `json:"took"`
		Result map[string]any `json:"result"`
	}
	for line := range strings.Lines(stderr.String()) {
		if json.Unmarshal([]byte(line), &finished) == nil && finished.Msg == "job finished" {
			break
		}
	}
	require.Equal(t, "job finished", finished.Msg, "%s", stderr.String())
	require.IsType(t, "", finished.Took, "a duration is logged as text such as 12ms")
	require.Regexp(t, `^[0-9.]+(ns|µs|ms|s)$`, finished.Took)
	require.Equal(t, printed.Result, finished.Result, "-json and the log name the result alike")
}
