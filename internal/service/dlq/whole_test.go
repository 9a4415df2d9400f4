package dlq_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// wholeBundle runs agent billing's main queue and DLQ under a test prefix:
// the main handler refuses every message (permanently, so it dies at once)
// until healthy is set, and records what it sees.
type wholeBundle struct {
	tp      *topology.Topology
	dom     topology.Domain
	db      *gorm.DB
	pub     *messaging.Publisher
	reg     *prometheus.Registry
	healthy atomic.Bool
	seen    chan messaging.Delivery
	dead    atomic.Pointer[messaging.Delivery] // the last delivery the DLQ handler got
}

// setupWhole is setupWholePrefetch with a prefetch of 1.
func setupWhole(t *testing.T, log *slog.Logger) *wholeBundle {
	t.Helper()
	return setupWholePrefetch(t, log, 1)
}

// setupWholePrefetch starts the bundle's routes with prefetch unacked
// deliveries per channel.
func setupWholePrefetch(t *testing.T, log *slog.Logger, prefetch int) *wholeBundle {
	t.Helper()
	_, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	b := &wholeBundle{tp: tp, db: storetest.MySQL(t), reg: prometheus.NewRegistry(), seen: make(chan messaging.Delivery, 16)}
	b.dom, _ = tp.Domain(topology.DomainAgentBilling)
	m := messaging.NewMetrics(b.reg)
	// A 17 MB message takes a while to confirm under the race detector.
	b.pub, err = messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Timeout: 2 * time.Minute}, tp, m, log)
	require.NoError(t, err)
	t.Cleanup(func() { b.pub.Close() })
	store := handlers.NewDeadLetters(b.db, b.dom, log)
	runMainAndDLQ(t, b.dom, b.pub, m, log, prefetch, messaging.ChainConfig{RequeueDelay: 100 * time.Millisecond},
		func(_ context.Context, d messaging.Delivery) error {
			b.seen <- d
			if !b.healthy.Load() {
				return messaging.Permanent(errors.New("refused"))
			}
			return nil
		},
		func(ctx context.Context, d messaging.Delivery) error {
			b.dead.Store(&d)
			return store.Handle(ctx, d)
		})
	return b
}

func (b *wholeBundle) next(t *testing.T) messaging.Delivery {
	t.Helper()
	select {
	case d := <-b.seen:
		return d
	case <-time.After(2 * time.Minute):
		t.Fatal("the main handler saw nothing")
		return messaging.Delivery{}
	}
}

// A dead message with a 70 KB header and a 17 MB body is stored whole: its
// replay republishes the identical header value and the body the DLQ
// received, byte for byte.
func TestReplayRepublishesA70KBHeaderAnd17MBBodyWhole(t *testing.T) {
	t.Parallel()
	b := setupWhole(t, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	header := strings.Repeat("0123456789abcdef", 70_000/16+1)[:70_000]
	pad := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 17_000_000/36+1)[:17_000_000]
	body := `{"deductionId":"d-big","username":"u","amountFen":"0.5","modelName":"m","inputTokens":1,"outputTokens":1,"pad":"` + pad + `"}`
	require.NoError(t, b.pub.Send(ctx, messaging.Outgoing{RoutingKey: b.dom.RoutingKey, Body: []byte(body),
		MessageID: "big-1", TypeID: b.dom.TypeID, Headers: map[string]string{"x-big": header}}))
	first := b.next(t)
	require.Len(t, first.Body, len(body))

	dead := dlq.NewStore(b.db, b.tp)
	var entries []dlq.Entry
	require.Eventually(t, func() bool {
		var err error
		entries, err = dead.List(ctx, dlq.Filter{})
		require.NoError(t, err)
		return len(entries) == 1
	}, 2*time.Minute, 50*time.Millisecond, "the dead message was never stored")
	got := b.dead.Load()
	require.Empty(t, entries[0].Body, "List reads summaries")
	require.EqualValues(t, len(got.Body), entries[0].BodyBytes)
	entry, err := dead.Get(ctx, entries[0].Ref)
	require.NoError(t, err)
	require.Len(t, entry.Body, len(got.Body), "stored body bytes")
	require.True(t, bytes.Equal(got.Body, entry.Body), "the stored body differs from the dead one")

	b.healthy.Store(true)
	require.NoError(t, dead.Replay(ctx, b.pub, entries[0].Ref, false))
	replayed := b.next(t)
	require.Equal(t, "big-1", replayed.MessageID)
	require.Equal(t, "1", replayed.Headers[messaging.HeaderReplay])
	require.Len(t, replayed.Headers["x-big"], len(header), "replayed header bytes")
	require.Equal(t, header, replayed.Headers["x-big"], "the replayed header differs")
	require.Len(t, replayed.Body, len(got.Body), "replayed body bytes")
	require.True(t, bytes.Equal(got.Body, replayed.Body), "the replayed body differs from the dead one")
	t.Logf("header %d bytes, dead body %d bytes, stored %d, replayed %d (header %d)",
		len(header), len(got.Body), len(entry.Body), len(replayed.Body), len(replayed.Headers["x-big"]))
}

// A message id as long as AMQP allows (255 bytes) is stored and replayed
// whole; it was cut to 128.
func TestReplayKeepsA255ByteMessageID(t *testing.T) {
	t.Parallel()
	b := setupWhole(t, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	id := strings.Repeat("id-", 85)
	require.NoError(t, b.pub.Send(ctx, messaging.Outgoing{RoutingKey: b.dom.RoutingKey, Body: []byte(`{"deductionId":"d-1"}`),
		MessageID: id, TypeID: b.dom.TypeID}))
	b.next(t)
	dead := dlq.NewStore(b.db, b.tp)
	var entries []dlq.Entry
	require.Eventually(t, func() bool {
		var err error
		entries, err = dead.List(ctx, dlq.Filter{})
		require.NoError(t, err)
		return len(entries) == 1
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, id, entries[0].MessageID)
	b.healthy.Store(true)
	require.NoError(t, dead.Replay(ctx, b.pub, entries[0].Ref, false))
	require.Equal(t, id, b.next(t).MessageID)
}

// recorder is a Republish that keeps what it is asked to send.
type recorder struct{ sent []messaging.Outgoing }

func (r *recorder) Send(_ context.Context, out messaging.Outgoing) error {
	r.sent = append(r.sent, out)
	return nil
}

// insertRow stores a dead message of the email domain as SQL would, and
// returns its ref.
func insertRow(t *testing.T, db *gorm.DB, dom topology.Domain, messageType, headers string) dlq.Ref {
	t.Helper()
	require.NoError(t, db.Exec("INSERT INTO "+dom.DLQTable+" (dedup_key, queue, message_type, message_id, body, headers, dead_at)"+
		" VALUES (?, ?, ?, 'm-1', '{}', ?, NOW())", storetest.Unique("k"), dom.DLQ, messageType, headers).Error)
	var id uint64
	require.NoError(t, db.Raw("SELECT MAX(id) FROM "+dom.DLQTable).Scan(&id).Error)
	return dlq.Ref{Domain: dom.Name, ID: id}
}

// A row whose headers are not the JSON object they were (one stored cut to
// 64 KB before migration 00014) is not replayed, and stays unclaimed: a
// replay without its headers would be another message.
func TestReplayRefusesARowWithDamagedHeaders(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	tp, err := topology.New(topology.Config{Prefix: storetest.Unique("t")})
	require.NoError(t, err)
	dom, _ := tp.Domain(topology.DomainEmail)
	headers := `{"x-big":"` + strings.Repeat("a", 70_000) + `"}`
	ref := insertRow(t, db, dom, dom.TypeID, headers[:65535])
	dead := dlq.NewStore(db, tp)
	var pub recorder
	require.ErrorIs(t, dead.Replay(context.Background(), &pub, ref, false), dlq.ErrDamaged)
	require.Empty(t, pub.sent)
	e, err := dead.Get(context.Background(), ref)
	require.NoError(t, err)
	require.Nil(t, e.ReplayedAt, "not claimed")
}

// A replay sends the stored headers as they were: a __TypeId__ longer than
// the message_type column is sent whole, not as the column's cut, and a
// number keeps its digits.
func TestReplaySendsTheStoredTypeWhole(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	tp, err := topology.New(topology.Config{Prefix: storetest.Unique("t")})
	require.NoError(t, err)
	dom, _ := tp.Domain(topology.DomainEmail)
	long := "com.example." + strings.Repeat("Nested$", 60) + "EmailCodeDispatchMessage"
	ref := insertRow(t, db, dom, long[:255], `{"__TypeId__":"`+long+`","x-email-retry-count":3,"x-big-number":12345678901234567890}`)
	var pub recorder
	require.NoError(t, dlq.NewStore(db, tp).Replay(context.Background(), &pub, ref, false))
	require.Len(t, pub.sent, 1)
	require.Equal(t, long, pub.sent[0].TypeID)
	require.Equal(t, long, pub.sent[0].Headers[messaging.HeaderTypeID])
	require.NotContains(t, pub.sent[0].Headers, dom.RetryHeader)
	require.Equal(t, "12345678901234567890", pub.sent[0].Headers["x-big-number"], "numbers keep their digits")
}
