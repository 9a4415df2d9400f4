package messaging_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/stretchr/testify/require"
)

// A handler called directly with WithDelivery, as tools and tests do, logs
// the trace id the same way.
func TestWithDeliveryCarriesTheTraceID(t *testing.T) {
	t.Parallel()
	ctx := messaging.WithDelivery(context.Background(), messaging.Delivery{MessageID: "m-1", TraceID: "trace-8"})
	require.Equal(t, "trace-8", correlation.CorrelationID(ctx))
	d, ok := messaging.DeliveryFrom(ctx)
	require.True(t, ok)
	require.Equal(t, "m-1", d.MessageID)
	require.Empty(t, correlation.CorrelationID(messaging.WithDelivery(context.Background(), messaging.Delivery{})))
}
