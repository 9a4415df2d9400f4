package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// brokerUsers are RabbitMQ users of a vhost of the test's own, made with
// the permissions doc/deploy.md shows (its rabbitmqctl lines, for the
// fleet's prefix), deleted with the vhost when the test ends. The
// broker's default vhost and its users are not touched.
type brokerUsers struct {
	vhost    string
	names    map[string]string // binary -> user
	password string
	amqpHost string
	amqpPort string
	mgmt     string // the management API, without credentials
}

// docPermissions are the users doc/deploy.md makes: user -> configure,
// write, read, and tags.
func docPermissions(t *testing.T) (map[string][3]string, map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("../doc/deploy.md")
	require.NoError(t, err)
	perms := map[string][3]string{}
	for _, m := range regexp.MustCompile(`(?m)^rabbitmqctl set_permissions -p / (isle-[a-z]+) '([^']*)' '([^']*)' '([^']*)'$`).FindAllStringSubmatch(string(raw), -1) {
		perms[m[1]] = [3]string{m[2], m[3], m[4]}
	}
	tags := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^rabbitmqctl set_user_tags (isle-[a-z]+) ([a-z]+)$`).FindAllStringSubmatch(string(raw), -1) {
		tags[m[1]] = m[2]
	}
	return perms, tags
}

// admin calls the management API as the test broker's administrator.
func admin(t *testing.T, method, path string, body any) {
	t.Helper()
	u, err := url.Parse(storetest.ManagementURL())
	require.NoError(t, err)
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(raw)
	}
	pass, _ := u.User.Password()
	req, err := http.NewRequest(method, u.Scheme+"://"+u.Host+"/api/"+path, r)
	require.NoError(t, err)
	req.SetBasicAuth(u.User.Username(), pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, msg)
}

func newBrokerUsers(t *testing.T, prefix string) *brokerUsers {
	t.Helper()
	perms, tags := docPermissions(t)
	require.Len(t, perms, 6, "doc/deploy.md: api, worker, relay, reconcile, islectl and keda")
	au, err := url.Parse(storetest.AMQPURL())
	require.NoError(t, err)
	mu, err := url.Parse(storetest.ManagementURL())
	require.NoError(t, err)
	b := &brokerUsers{vhost: storetest.Unique("isle-users-"), names: map[string]string{}, password: storetest.Unique("pw-"),
		amqpHost: au.Hostname(), amqpPort: au.Port(), mgmt: mu.Scheme + "://" + mu.Host}
	admin(t, http.MethodPut, "vhosts/"+url.PathEscape(b.vhost), map[string]any{})
	t.Cleanup(func() { admin(t, http.MethodDelete, "vhosts/"+url.PathEscape(b.vhost), nil) })
	for user, p := range perms {
		name := b.vhost + "-" + user
		admin(t, http.MethodPut, "users/"+url.PathEscape(name), map[string]any{"password": b.password, "tags": tags[user]})
		t.Cleanup(func() { admin(t, http.MethodDelete, "users/"+url.PathEscape(name), nil) })
		forPrefix := func(expr string) string {
			return strings.ReplaceAll(expr, `^eisland\.`, `^`+regexp.QuoteMeta(prefix)+`\.`)
		}
		admin(t, http.MethodPut, "permissions/"+url.PathEscape(b.vhost)+"/"+url.PathEscape(name),
			map[string]string{"configure": forPrefix(p[0]), "write": forPrefix(p[1]), "read": forPrefix(p[2])})
		b.names[strings.TrimPrefix(user, "isle-")] = name
	}
	return b
}

// env is e with the broker of b, as bin's user.
func (b *brokerUsers) env(e fleetEnv, bin string) fleetEnv {
	out := maps.Clone(e)
	out["RABBITMQ_HOST"], out["RABBITMQ_PORT"], out["RABBITMQ_VHOST"] = b.amqpHost, b.amqpPort, b.vhost
	out["RABBITMQ_USERNAME"], out["RABBITMQ_PASSWORD"] = b.names[bin], b.password
	out["RABBITMQ_MANAGEMENT_URL"] = b.mgmt
	return out
}

// dial connects to b's vhost as bin's user.
func (b *brokerUsers) dial(t *testing.T, bin string) *amqp.Connection {
	t.Helper()
	u := url.URL{Scheme: "amqp", User: url.UserPassword(b.names[bin], b.password), Host: net.JoinHostPort(b.amqpHost, b.amqpPort), Path: "/" + b.vhost}
	conn, err := amqp.Dial(u.String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// refused runs op on a channel of its own and wants the broker to refuse
// it (403 ACCESS_REFUSED), which closes that channel.
func refused(t *testing.T, conn *amqp.Connection, what string, op func(*amqp.Channel) error) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	err = op(ch)
	if err == nil { // a publish: the refusal closes the channel afterwards
		select {
		case ae := <-closed:
			err = ae
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not refused within 30s", what)
		}
	}
	var ae *amqp.Error
	require.ErrorAs(t, err, &ae, "%s: %v", what, err)
	require.Equal(t, amqp.AccessRefused, ae.Code, "%s: %v", what, err)
}

// publish sends body to d's exchange under key as bin's user and waits for
// the broker's confirm.
func (b *brokerUsers) publish(t *testing.T, bin string, d topology.Domain, key string, body []byte) {
	t.Helper()
	ch, err := b.dial(t, bin).Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Confirm(false))
	c, err := ch.PublishWithDeferredConfirm(d.Exchange, key, true, false, amqp.Publishing{ContentType: "application/json",
		DeliveryMode: amqp.Persistent, Headers: amqp.Table{"__TypeId__": d.TypeID}, Body: body})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok, err := c.WaitContext(ctx)
	require.NoError(t, err)
	require.True(t, ok, "confirmed")
}

// Every binary does its work as the RabbitMQ user doc/deploy.md makes for
// it, on a vhost of its own: islectl applies and verifies the topology; a
// paid order goes through the api, the worker and the relay to its receipt
// mail; the worker stores dead messages through the DLQs; the reconciler
// replays a dead replication message and reads queue depths. And each user
// is refused what its binary never does. No binary logs a refusal.
func TestEveryBinaryWorksAsItsOwnRabbitMQUser(t *testing.T) {
	t.Parallel()
	dsn := storetest.MySQLDSN(t)
	e := newFleetEnv(t, dsn)
	prefix := e["RABBITMQ_NAME_PREFIX"]
	b := newBrokerUsers(t, prefix)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { store.CloseMySQL(db) })

	ctl := b.env(e, "islectl")
	for _, args := range [][]string{{"migrate"}, {"topology", "apply"}, {"topology", "verify"}} {
		out, code := islectl(t, ctl, args...)
		require.Zero(t, code, "islectl %v: %s", args, out)
		if args[0] == "topology" && args[1] == "verify" {
			require.Contains(t, out, "checked through the management API", "islectl reads the bindings")
		}
	}
	_, err = store.NewAccounts(db).Create(context.Background(), "pia", "pia@example.com", decimal.Zero)
	require.NoError(t, err)

	apiEnv := b.env(e, "api")
	keys := payKeys(t, apiEnv)
	api := start(t, apiEnv, "api")
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(api.waitFor(t, 30*time.Second, "api started"))[1]
	worker := start(t, b.env(e, "worker"), "worker")
	worker.waitFor(t, 30*time.Second, "worker started")
	relay := start(t, b.env(e, "relay"), "relay")
	relay.waitFor(t, 30*time.Second, "relay started")

	// A paid order: the api publishes the callback, the worker pays the
	// order and writes the receipt to the outbox, the relay publishes it,
	// the worker mails it.
	tok, code := islectl(t, ctl, "token", "-user", "pia")
	require.Zero(t, code, tok)
	body, _ := json.Marshal(map[string]any{"product": "agent-recharge", "amountFen": 1200, "channel": "ALIPAY"})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/payments/orders", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var o struct{ OutTradeNo string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	sim := maps.Clone(ctl)
	sim["API_ADDR"] = addr
	out, code := islectl(t, sim, "pay", "simulate", "-dir", keys, "-order", o.OutTradeNo)
	require.Zero(t, code, out)
	var paid store.PaymentOrder
	require.Eventually(t, func() bool {
		return db.Where("out_trade_no = ?", o.OutTradeNo).Take(&paid).Error == nil && paid.ReceiptSentAt != nil
	}, 60*time.Second, 50*time.Millisecond, "paid and receipted")
	require.Equal(t, order.Paid, paid.Status)

	// Dead messages: the worker publishes their DLQ copies and stores them.
	notify, _ := tp.Domain(topology.DomainPaymentNotify)
	b.publish(t, "islectl", notify, notify.RoutingKey, []byte(`{"channel":"ALIPAY","outTradeNo":"no-such-order","tradeState":"SUCCESS","verifyOk":true,"amountFen":1,"currency":"CNY"}`))
	replication, _ := tp.Domain(topology.DomainObjectReplication)
	b.publish(t, "islectl", replication, replication.RoutingKey, []byte(`{"taskId":424242}`))
	count := func(table string) int64 {
		var n int64
		require.NoError(t, db.Table(table).Count(&n).Error)
		return n
	}
	require.Eventually(t, func() bool { return count(notify.DLQTable) == 1 && count(replication.DLQTable) == 1 }, 60*time.Second, 50*time.Millisecond)

	// The reconciler replays the dead replication message (the worker
	// stores it again) and reads the billing queues' depths.
	rec := &billingFleet{env: b.env(e, "reconcile")}
	require.Contains(t, rec.reconcileOnce(t, "dlq-replay"), "replayed 1, skipped 0, failed 0")
	require.Eventually(t, func() bool { return count(replication.DLQTable) == 2 }, 60*time.Second, 50*time.Millisecond)
	require.Contains(t, rec.reconcileOnce(t, "balance-sync"), "balance-sync: ")

	// The management API: the api (its console), the reconciler
	// (balance-sync) and islectl read queue statistics of their vhost; the
	// worker and the relay have no business there.
	for bin, allowed := range map[string]bool{"api": true, "reconcile": true, "islectl": true, "worker": false, "relay": false} {
		u, err := url.Parse(b.mgmt)
		require.NoError(t, err)
		u.User = url.UserPassword(b.names[bin], b.password)
		ra, err := rabbitadmin.New(u.String(), b.vhost)
		require.NoError(t, err)
		stats, err := ra.Queues(context.Background())
		if !allowed {
			require.Error(t, err, bin)
			continue
		}
		require.NoError(t, err, bin)
		require.Contains(t, stats, notify.Queue, bin)
	}

	// What each user may not do.
	ex := tp.Exchanges()[0]
	for _, bin := range []string{"worker", "relay", "reconcile", "keda"} {
		conn := b.dial(t, bin)
		refused(t, conn, bin+" declares", func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare(ex, topology.ExchangeKind, true, false, false, false, nil)
		})
		refused(t, conn, bin+" deletes a queue", func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(notify.Queue, false, false, false)
			return err
		})
	}
	get := func(queue string) func(*amqp.Channel) error {
		return func(ch *amqp.Channel) error { _, _, err := ch.Get(queue, false); return err }
	}
	pub := func(d topology.Domain) func(*amqp.Channel) error {
		return func(ch *amqp.Channel) error {
			return ch.Publish(d.Exchange, d.RoutingKey, false, false, amqp.Publishing{Body: []byte("{}")})
		}
	}
	refused(t, b.dial(t, "api"), "the api consumes", get(notify.Queue))
	refused(t, b.dial(t, "worker"), "the worker reads a retry queue", get(notify.RetryQueue))
	refused(t, b.dial(t, "relay"), "the relay consumes", get(notify.Queue))
	refused(t, b.dial(t, "reconcile"), "the reconciler publishes a payment", pub(notify))
	refused(t, b.dial(t, "reconcile"), "the reconciler consumes", get(replication.DLQ))
	refused(t, b.dial(t, "keda"), "KEDA publishes", pub(notify))

	for name, p := range map[string]*proc{"api": api, "worker": worker, "relay": relay} {
		require.NotContains(t, p.output(), "ACCESS_REFUSED", name)
		require.NotContains(t, p.output(), "not_authorised", name)
	}
}
