package dlq_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counted returns isle_messages_total{domain, outcome}.
func (b *wholeBundle) counted(t *testing.T, outcome string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "isle_messages_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["domain"] == b.dom.Name && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A dead message the database would keep damaged (here a trigger cuts its
// headers) is not stored and not dropped: each attempt is logged as an error
// with its message id and counted as failed, the message stays in the DLQ,
// and once the database is fixed it is stored, once.
func TestDeadMessageTheDatabaseWouldDamageIsKeptAndLoggedWithItsID(t *testing.T) {
	t.Parallel()
	var logs storetest.LogBuffer
	b := setupWhole(t, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx := context.Background()
	table := b.dom.DLQTable
	require.NoError(t, b.db.Exec("CREATE TRIGGER cut_headers BEFORE INSERT ON "+table+
		" FOR EACH ROW SET NEW.headers = LEFT(NEW.headers, 10)").Error)
	require.NoError(t, b.pub.Send(ctx, messaging.Outgoing{RoutingKey: b.dom.RoutingKey, Body: []byte(`{"deductionId":"d-1","username":"u"}`),
		MessageID: "damaged-1", TypeID: b.dom.TypeID}))
	b.next(t)

	if !assert.Eventually(t, func() bool { return b.counted(t, messaging.OutcomeFailed) >= 3 }, 30*time.Second, 20*time.Millisecond) {
		t.Fatalf("the refusals were not counted as failed; logs:\n%s", logs.String())
	}
	var rows int
	require.NoError(t, b.db.Raw("SELECT COUNT(*) FROM "+table).Scan(&rows).Error)
	require.Zero(t, rows, "no damaged copy is stored")
	require.Zero(t, b.counted(t, messaging.OutcomeStored))
	var named int
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, `"message_id":"damaged-1"`) &&
			strings.Contains(line, "cannot be stored") {
			named++
		}
	}
	require.GreaterOrEqual(t, named, 3, "each refusal is an error naming the message; logs:\n%s", logs.String())

	require.NoError(t, b.db.Exec("DROP TRIGGER cut_headers").Error)
	require.Eventually(t, func() bool { return b.counted(t, messaging.OutcomeStored) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, b.db.Raw("SELECT COUNT(*) FROM "+table).Scan(&rows).Error)
	require.Equal(t, 1, rows)
}

// With the worker's prefetch, the dead messages behind one the database
// refuses are still stored: the router handles what the subscriber holds
// at once, and the refused one is requeued behind them. (With a prefetch of
// 1 they would wait for it.) The refusal is counted once its requeue delay
// has passed: DeadLetterMiddleware counts an outcome once it has decided
// it, its pause included.
func TestDeadMessagesBehindARefusedOneAreStored(t *testing.T) {
	t.Parallel()
	b := setupWholePrefetch(t, slog.New(slog.NewTextHandler(io.Discard, nil)), messaging.PrefetchDefault)
	ctx := context.Background()
	table := b.dom.DLQTable
	require.NoError(t, b.db.Exec("CREATE TRIGGER cut_headers BEFORE INSERT ON "+table+
		" FOR EACH ROW BEGIN IF NEW.message_id = 'damaged-1' THEN SET NEW.headers = LEFT(NEW.headers, 10); END IF; END").Error)
	for _, id := range []string{"damaged-1", "fine-1", "fine-2"} {
		require.NoError(t, b.pub.Send(ctx, messaging.Outgoing{RoutingKey: b.dom.RoutingKey,
			Body: []byte(`{"deductionId":"` + id + `"}`), MessageID: id, TypeID: b.dom.TypeID}))
		b.next(t)
	}
	var stored []string
	require.Eventually(t, func() bool {
		require.NoError(t, b.db.Raw("SELECT message_id FROM "+table+" ORDER BY message_id").Scan(&stored).Error)
		return len(stored) == 2
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"fine-1", "fine-2"}, stored)
	require.Eventually(t, func() bool { return b.counted(t, messaging.OutcomeFailed) > 0 }, 30*time.Second, 20*time.Millisecond)
}
