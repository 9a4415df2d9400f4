package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// badMessagesBuilt is how many bad messages the table holds: the test fails
// when it drops below (the two tables together hold at least 60;
// internal/service/httpapi/badinput_test.go has the endpoints').
const badMessagesBuilt = 83

// The two answers a consumer may give a bad message (doc/messaging.md): a
// permanent error sends it to the DLQ at once; nil acknowledges it, a
// redelivery or a message the contract says to drop, as a no-op.
const (
	dead  = "DLQ"
	noop  = "ack"
	badID = "bad-message"
)

// A badMessage is one body a consumer may receive that it must not act on.
type badMessage struct {
	domain string // the consumer's
	name   string
	body   string
	id     string // the AMQP message id; badID when empty
	want   string // dead or noop
	// isle, for a message without an id (id "-"), is the part of its own
	// the flow gives the delivery (messaging.Delivery.IsleID); redelivered
	// is the broker's flag.
	isle        string
	redelivered bool
}

// TestBadMessagesChangeNothing hands every consumer of handlers.Consumers
// the malformed, wrong-type, out-of-range, oversized, forged and replayed
// messages of its contract, as raw bodies in a messaging.Delivery through
// the consumer the worker runs (the contract's decoding included), and
// checks that each goes to the DLQ (a permanent error) or is acknowledged
// as a no-op, as the contract says, and that nothing changed: MySQL, Redis,
// the mailer's directory and the object stores (doc/badinput.md).
func TestBadMessagesChangeNothing(t *testing.T) {
	t.Parallel() // its services are its own; its cases run one after the other
	f := newConsumerFixture(t)
	cases := f.badMessages()
	t.Logf("%d bad messages across %d consumers", len(cases), len(handlers.Consumers))
	require.GreaterOrEqual(t, len(cases), badMessagesBuilt, "the bad-input table lost cases")
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.domain] = true
	}
	for _, c := range handlers.Consumers {
		require.True(t, covered[c.Domain], "no bad message for the %s consumer", c.Domain)
	}

	before := f.state(t)
	for _, c := range cases {
		t.Run(c.domain+": "+c.name, func(t *testing.T) {
			err := f.deliver(t, c)
			after := f.state(t)
			// No key may move here: the consumers keep no counters, and
			// their locks are gone when they return.
			changed := before.Diff(after, nil)
			before = after // the next case starts from here, whatever this one did
			switch c.want {
			case dead:
				require.True(t, messaging.IsPermanent(err), "want a permanent error (the DLQ), got %v", err)
			case noop:
				require.NoError(t, err)
			}
			require.Empty(t, changed, "the message changed state")
		})
	}
}

// consumerFixture runs the worker's consumers over real MySQL and Redis,
// directory object stores and a directory mailer, with the data the bad
// messages aim at: an account, a paid order whose receipt went out, a
// pending one, a replicated object, a stored identity material and an
// applied score, deduction and usage.
type consumerFixture struct {
	db       *gorm.DB
	rdb      *store.Redis
	tp       *topology.Topology
	consume  map[string]messaging.HandlerFunc
	dirs     []string // the mailer's and the object stores'
	source   objstore.Store
	target   objstore.Store
	userID   int64 // ann's account
	paid     store.PaymentOrder
	pending  store.PaymentOrder
	taskDone uint64 // a replicated object's task
	foreign  uint64 // a task whose source is outside the source store
	inTarget uint64 // a task whose source is in the replica store
}

func newConsumerFixture(t *testing.T) *consumerFixture {
	t.Helper()
	f := &consumerFixture{db: storetest.MySQL(t), rdb: storetest.Redis(t), consume: map[string]messaging.HandlerFunc{}}
	var err error
	f.tp, err = topology.New(topology.Config{})
	require.NoError(t, err)
	open := func() objstore.Store {
		dir := t.TempDir()
		f.dirs = append(f.dirs, dir)
		s, err := objstore.Open("file://"+dir, objstore.Options{})
		require.NoError(t, err)
		return s
	}
	f.source, f.target = open(), open()
	identity := open()
	mailDir := t.TempDir()
	f.dirs = append(f.dirs, mailDir)
	mailer, err := mail.Open("file://"+mailDir+"?from=no-reply%40isle.test", mail.Options{})
	require.NoError(t, err)
	ledger, usage := store.NewLedgerWriter(f.db, nil), store.NewUsageWriter(f.db, nil)
	t.Cleanup(func() { ledger.Close(); usage.Close() })
	keys, err := gatewayKeys()
	require.NoError(t, err)
	backends := handlers.Backends{DB: f.db, Redis: f.rdb, Ledger: ledger, Usage: usage, Log: quiet, Mailer: mailer, CopyTimeout: 10 * time.Second,
		Buckets:  handlers.Buckets{Source: f.source, Target: f.target, Identity: identity},
		Payments: gateways(t, keys)} // the rows without an amount meet a real verification
	for _, r := range handlers.Routes(f.tp, backends) {
		if !r.DLQ {
			f.consume[r.Name] = r.Handle
		}
	}
	f.seed(t)
	return f
}

// seed applies the first, good deliveries the replays repeat.
func (f *consumerFixture) seed(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	u, err := store.NewAccounts(f.db).Create(ctx, "ann", "ann@example.com", decimal.RequireFromString("50"))
	require.NoError(t, err)
	f.userID = int64(u.ID)
	orders := store.NewOrders(f.db, f.rdb)
	f.paid, err = orders.Create(ctx, order.New{Username: "ann", Product: order.ProductAgentRecharge, AmountFen: 2500,
		Channel: order.ChannelAlipay, ReceiptEmail: "ann@example.com"})
	require.NoError(t, err)
	f.pending, err = orders.Create(ctx, order.New{Username: "wendy", Product: order.ProductAgentRecharge, AmountFen: 3000,
		Channel: order.ChannelWechat})
	require.NoError(t, err)
	_, err = store.NewIdentities(f.db, f.rdb).Record(ctx, f.domain(topology.DomainIdentityMaterial),
		store.VerificationResult{Username: "ivy", CertifyID: "c-1", Passed: true, MaterialInfo: `{"enc":1}`})
	require.NoError(t, err)
	f.taskDone = f.task(t, "avatar/ann/1/me.png", "")
	f.foreign = f.task(t, "avatar/ann/2/me.png", "file:///etc/passwd")
	f.inTarget = f.task(t, "avatar/ann/3/me.png", f.target.URL("avatar/ann/3/me.png"))

	for _, m := range f.firstDeliveries() {
		require.NoError(t, f.deliver(t, m), "%s: %s", m.domain, m.body)
	}
}

// task stores an object and makes its replication task, as the API and
// the relay do; sourceURL overrides the task's source.
func (f *consumerFixture) task(t *testing.T, key, sourceURL string) uint64 {
	t.Helper()
	body := []byte("the bytes of " + key)
	info, err := f.source.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), "image/png")
	require.NoError(t, err)
	obj, err := store.NewObjects(f.db).Create(t.Context(), store.StoredObject{OwnerUsername: "ann", Kind: store.KindAvatar,
		ObjectKey: key, SizeBytes: info.Size, SHA256: info.SHA256, SourceURL: f.source.URL(key)}, "trace")
	require.NoError(t, err)
	var outbox store.ObjectOutbox
	require.NoError(t, f.db.Where("object_id = ?", obj.ID).Take(&outbox).Error)
	task := store.ReplicationTask{OutboxID: outbox.ID, ObjectID: obj.ID, SourceURL: obj.SourceURL, Priority: outbox.Priority,
		Status: store.TaskPending, SHA256: info.SHA256}
	if sourceURL != "" {
		task.SourceURL = sourceURL
	}
	require.NoError(t, f.db.Omit("id", "created_at", "updated_at").Create(&task).Error)
	return task.ID
}

func (f *consumerFixture) domain(name string) topology.Domain {
	d, _ := f.tp.Domain(name)
	return d
}

// deliver hands m's body to the domain's consumer as the worker does: one
// delivery of its main queue with the record's __TypeId__.
func (f *consumerFixture) deliver(t *testing.T, m badMessage) error {
	t.Helper()
	domain, id, body := m.domain, m.id, []byte(m.body)
	d := f.domain(domain)
	if id == "" {
		id = badID
	}
	dl := messaging.Delivery{MessageID: id, TraceID: "trace-" + id, TypeID: d.TypeID, Queue: d.Queue, RoutingKey: d.RoutingKey, Body: body,
		Headers: map[string]string{messaging.HeaderTypeID: d.TypeID}, Redelivered: m.redelivered}
	if id == "-" { // no id: as deliveryOf and the flow key it
		sum := sha256.Sum256(body)
		dl.MessageID = "sha256:" + hex.EncodeToString(sum[:16])
		dl.IsleID = dl.MessageID + ":" + m.isle
	}
	consume, ok := f.consume[domain]
	require.True(t, ok, "no consumer for %s", domain)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return consume(messaging.WithDelivery(ctx, dl), dl)
}

// state is what a bad message must leave as it was: MySQL, Redis and every
// file of the mailer and the stores (storetest.State).
func (f *consumerFixture) state(t *testing.T) storetest.State {
	t.Helper()
	return storetest.TakeState(t, f.db, f.rdb, f.dirs...)
}

// taskID is the ObjectReplicationMessage of a task.
func taskID(id uint64) string { return `{"taskId":` + strconv.FormatUint(id, 10) + `,"traceId":"t"}` }
