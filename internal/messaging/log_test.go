package messaging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/correlation"
	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// logBuffer collects JSON lines written by the consumer's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// raw returns the lines logged until now, as written.
func (b *logBuffer) raw() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// line returns the first line logged with msg, or nil.
func (b *logBuffer) line(t *testing.T, msg string) map[string]any {
	t.Helper()
	for _, raw := range b.raw() {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// Every line logged with a handler's context carries the delivery's trace
// id, though neither the handler nor the flow names it: the handler's own
// line, the flow's panic line and its retry line.
func TestLogLinesCarryTheDeliverysTraceID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	logs := &logBuffer{}
	log := slog.New(correlation.Handler(slog.NewJSONHandler(logs, nil)))
	flow := messaging.NewFlow(messaging.ChainConfig{}, b.pub, b.metrics, log)
	calls := newCounter()
	b.run(t, messaging.ConsumerConfig{}, messaging.Route{Name: dom.Name, Queue: dom.Queue,
		Handle: flow.Main(dom, messaging.Each(func(ctx context.Context, d messaging.Delivery) error {
			if calls.see(d) == 1 {
				panic("first call")
			}
			log.InfoContext(ctx, "inside the handler", "n", 1)
			return nil
		}))})

	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{
		RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-traced", TraceID: "trace-7",
	}))
	require.Eventually(t, func() bool { return logs.line(t, "inside the handler") != nil }, 10*time.Second, poll)

	for _, msg := range []string{"inside the handler", "handler panicked", "message sent to the retry queue"} {
		line := logs.line(t, msg)
		require.NotNil(t, line, msg)
		require.Equal(t, "trace-7", line["trace_id"], msg)
		require.NotContains(t, line, "request_id", msg)
	}
	for _, raw := range logs.raw() {
		require.LessOrEqual(t, strings.Count(raw, `"trace_id":`), 1, raw)
	}
}

// A handler called directly with WithDelivery, as tools and tests do, logs
// the trace id the same way.
func TestWithDeliveryCarriesTheTraceID(t *testing.T) {
	t.Parallel()
	ctx := messaging.WithDelivery(context.Background(), messaging.Delivery{MessageID: "m-1", TraceID: "trace-8"})
	require.Equal(t, "trace-8", correlation.TraceID(ctx))
	d, ok := messaging.DeliveryFrom(ctx)
	require.True(t, ok)
	require.Equal(t, "m-1", d.MessageID)
	require.Empty(t, correlation.TraceID(messaging.WithDelivery(context.Background(), messaging.Delivery{})))
}
