package messaging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/eisland/isle/internal/correlation"
	"github.com/eisland/isle/internal/messaging"
	"github.com/stretchr/testify/require"
)

// logBuffer collects JSON lines written by the router's goroutines.
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
