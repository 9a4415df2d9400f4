package dlq_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// A message that exhausted its retries is stored; a replay sends it through
// the main queue once, with the retry count reset, and the handler sees it.
func TestReplayReachesTheHandlerOnce(t *testing.T) {
	t.Parallel()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix, Retry: map[string]topology.RetryPolicy{
		topology.DomainAgentBilling: {MaxRetries: 1, Delay: 100 * time.Millisecond},
	}})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := messaging.NewMetrics(prometheus.NewRegistry())
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL()}, tp, m, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	db := storetest.MySQL(t)
	dom, _ := tp.Domain(topology.DomainAgentBilling)

	var healthy atomic.Bool
	var mu sync.Mutex
	var seen []messaging.Delivery
	stop := runMainAndDLQ(t, dom, pub, m, log, 0, messaging.ChainConfig{}, func(ctx context.Context, d messaging.Delivery) error {
		mu.Lock()
		seen = append(seen, d)
		mu.Unlock()
		if !healthy.Load() {
			return errors.New("ledger unavailable")
		}
		return nil
	}, handlers.NewDeadLetters(db, dom, log).Handle)
	ctx := context.Background()

	body := `{"deductionId":"d-1","username":"u","amountFen":"0.5","modelName":"m","inputTokens":1,"outputTokens":1}`
	require.NoError(t, pub.Send(ctx, messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(body), MessageID: "m-1", TypeID: dom.TypeID}))
	store := dlq.NewStore(db, tp)
	var entries []dlq.Entry
	require.Eventually(t, func() bool {
		entries, err = store.List(ctx, dlq.Filter{})
		require.NoError(t, err)
		return len(entries) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, dom.Name, entries[0].Ref.Domain)
	require.Equal(t, 1, entries[0].RetryCount)

	healthy.Store(true)
	require.NoError(t, store.Replay(ctx, pub, entries[0].Ref, false))
	require.ErrorIs(t, store.Replay(ctx, pub, entries[0].Ref, false), dlq.ErrAlreadyReplayed)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 }, 10*time.Second, 20*time.Millisecond)
	// Stopped, the subscriber gives back what it holds unsettled: a fourth
	// call is counted by now, and a copy still to come is in a queue.
	stop()
	for _, q := range []string{dom.Queue, dom.RetryQueue, dom.DLQ} {
		require.Zero(t, storetest.QueueDepth(t, conn, q), q)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3, "2 failed attempts, then the replay once")
	last := seen[2]
	require.Equal(t, "m-1", last.MessageID)
	require.Zero(t, last.Retry, "the retry count is reset")
	require.Equal(t, "1", last.Headers[messaging.HeaderReplay])
	require.Equal(t, dom.TypeID, last.TypeID)

	left, err := store.List(ctx, dlq.Filter{NotReplayed: true})
	require.NoError(t, err)
	require.Empty(t, left)
	res, err := store.ReplayAll(ctx, pub, dom.Name, false, 0)
	require.NoError(t, err)
	require.Equal(t, dlq.Result{}, res, "nothing left to replay without force")
}

// runMainAndDLQ runs dom's main queue, main behind MainChain, and its DLQ,
// dead behind DeadLetterChain, as the worker does: on a watermill Router
// fed by a Subscriber with prefetch unacked deliveries per channel (0: the
// default). They run until stop is called, or the test ends.
func runMainAndDLQ(t *testing.T, dom topology.Domain, pub *messaging.Publisher, m *messaging.Metrics, log *slog.Logger,
	prefetch int, cfg messaging.ChainConfig, main, dead messaging.HandlerFunc) (stop func()) {
	t.Helper()
	sub, err := messaging.NewSubscriber(messaging.SubscriberConfig{URL: storetest.AMQPURL(), Name: t.Name(), Prefetch: prefetch}, log)
	require.NoError(t, err)
	r, err := message.NewRouter(message.RouterConfig{}, nil)
	require.NoError(t, err)
	r.AddConsumerHandler("main", dom.Queue, sub, messaging.RouterHandler(main)).AddMiddleware(messaging.MainChain(dom, pub, m, cfg, log)...)
	r.AddConsumerHandler("dlq", dom.DLQ, sub, messaging.RouterHandler(dead)).AddMiddleware(messaging.DeadLetterChain(dom, m, cfg, log)...)
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	stop = sync.OnceFunc(func() {
		_ = r.Close()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
		_ = sub.Close()
	})
	t.Cleanup(stop)
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("router: %v", err)
	}
	return stop
}

func TestParseRef(t *testing.T) {
	t.Parallel()
	ref, err := dlq.ParseRef("payment-receipt/42")
	require.NoError(t, err)
	require.Equal(t, dlq.Ref{Domain: "payment-receipt", ID: 42}, ref)
	for _, bad := range []string{"", "email", "email/", "email/x", "/3", "email/0", "email/-1"} {
		t.Run(strconv.Quote(bad), func(t *testing.T) {
			_, err := dlq.ParseRef(bad)
			require.Error(t, err)
		})
	}
}
