package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// outageAnswer is what a client was told about one charge.
type outageAnswer struct {
	user, id string
	status   int
	Deducted string `json:"deductedFen"`
	CostMF   int64  `json:"costMicroFen"`
	Ledger   string `json:"ledger"`
}

// With RabbitMQ out of the api's reach for 3 s under load, every answer
// tells the truth about the money: a 2xx is a charge, recorded once in the
// ledger with what the client was told (written by the worker, from the
// broker or from the outbox through the relay, or by balance-sync for a
// charge whose messages could not be sent then), and a 5xx charged nothing;
// the usage statistics count every charge.
//
// The relay is part of it: a deferred charge's two messages may go out on
// different confirm channels, so the cut can let its deduction through and
// not its usage, which then exists only in the outbox.
func TestBrokerOutageAnswersMatchTheLedger(t *testing.T) {
	t.Parallel()
	users := map[string]string{}
	for i := range 20 {
		users[fmt.Sprintf("o%02d", i)] = "1000000"
	}
	broker, err := url.Parse(storetest.AMQPURL())
	require.NoError(t, err)
	proxy := storetest.NewProxy(t, broker.Host)
	host, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	f := newBillingFleet(t, users, func(e fleetEnv) {
		e["RABBITMQ_HOST"], e["RABBITMQ_PORT"] = host, port
		e["RABBITMQ_PUBLISH_TIMEOUT"] = "1s"
	})
	worker := start(t, f.env, "worker")
	worker.waitFor(t, 30*time.Second, "worker started")
	relay := start(t, f.env, "relay")
	relay.waitFor(t, 30*time.Second, "relay started")

	var (
		mu      sync.Mutex
		answers []outageAnswer
		wg      sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	stop := time.Now().Add(6 * time.Second)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				a := outageAnswer{user: fmt.Sprintf("o%02d", rand.IntN(20)), id: fmt.Sprintf("g%d-%d", g, n)}
				body := fmt.Sprintf(`{"requestId":%q,"username":%q,"modelName":"gpt-test","inputTokens":%d}`, a.id, a.user, 1+rand.IntN(50))
				req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/v1/agent/usage", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+f.token)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				a.status = resp.StatusCode
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	proxy.Down()
	time.Sleep(3 * time.Second)
	proxy.Up()
	wg.Wait()

	counts := map[string]int{}
	for _, a := range answers {
		counts[fmt.Sprintf("%d %s", a.status, a.Ledger)]++
	}
	t.Logf("answers: %v", counts)
	require.Less(t, counts["200 queued"], len(answers), "the outage was felt")

	// The relay publishes what waits in the outbox, the worker drains the
	// queues (a failure comes back from its retry queue); balance-sync
	// writes what neither did.
	drain(t, f.conn, f.tp, f.db, time.Minute)
	f.env["BALANCE_SYNC_PENDING_AGE"] = "1ms"
	f.env["BALANCE_SYNC_CONFIRM_DELAY"] = "0"
	out := f.reconcileOnce(t, "balance-sync")
	t.Log(strings.TrimSpace(out))

	charged, costMF := 0, int64(0)
	for _, a := range answers {
		var rows []store.LedgerEntry
		require.NoError(t, f.db.Where("username = ? AND kind = 'DEDUCT' AND entry_id = ?", a.user, a.id).Find(&rows).Error)
		if a.status != http.StatusOK {
			require.Empty(t, rows, "%s of %s answered %d but charged", a.id, a.user, a.status)
			continue
		}
		require.Len(t, rows, 1, "%s of %s answered 200 (%s)", a.id, a.user, a.Ledger)
		require.Equal(t, a.Deducted, rows[0].Deducted().StringFixed(8), "%s of %s", a.id, a.user)
		charged++
		costMF += a.CostMF
	}
	var usage struct {
		Events int64
		Cost   int64
	}
	require.NoError(t, f.db.Raw(`SELECT (SELECT COUNT(*) FROM agent_usage_event) AS events,
		(SELECT COALESCE(SUM(cost_micro_fen), 0) FROM agent_usage_stats) AS cost`).Scan(&usage).Error)
	require.EqualValues(t, charged, usage.Events, "usage counts every charge")
	require.Equal(t, costMF, usage.Cost)
	for u := range users {
		bal, err := store.NewBalances(nil, f.rdb).Balance(context.Background(), u)
		require.NoError(t, err)
		acct, err := store.NewAccounts(f.db).Get(context.Background(), u)
		require.NoError(t, err)
		require.True(t, bal.Equal(acct.BalanceFen), "%s: Redis %s, MySQL %s", u, bal, acct.BalanceFen)
		require.True(t, acct.BalanceFen.LessThan(decimal.RequireFromString("1000000")), "%s was charged", u)
	}
	t.Logf("charged %d requests, %d micro-fen; usage events %d", charged, costMF, usage.Events)
}
