package messaging

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// allocsThrough is how many allocations a message handed out by the
// subscriber (its context carrying its delivery) costs on its way through
// the middleware mws to a handler that answers nil.
func allocsThrough(t *testing.T, mws []message.HandlerMiddleware) float64 {
	t.Helper()
	handle := RouterHandler(func(context.Context, Delivery) error { return nil })
	h := message.HandlerFunc(func(msg *message.Message) ([]*message.Message, error) { return nil, handle(msg) })
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	const runs = 200
	msgs := make([]*message.Message, runs+1) // AllocsPerRun runs once more, unmeasured
	for i := range msgs {
		msgs[i] = message.NewMessage("m", []byte(`{}`))
		msgs[i].SetContext(withDelivery(context.Background(), &inflight{d: Delivery{MessageID: "m", TraceID: "trace-1",
			Headers: map[string]string{"x-trace-id": "trace-1"}}}))
	}
	next := 0
	return testing.AllocsPerRun(runs, func() {
		msg := msgs[next]
		next++
		_, err := h(msg)
		require.NoError(t, err)
	})
}

// A delivery goes through MainChain with its Delivery in its context once:
// the middleware read it there and complete it in place, and the outcome
// goes back to the metrics beside it, so the chain allocates nothing beyond
// what its span and its timeout take.
func TestMainChainPutsTheDeliveryInTheContextOnce(t *testing.T) {
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	dom, ok := tp.Domain(topology.DomainAgentBilling)
	require.True(t, ok)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	chain := allocsThrough(t, MainChain(dom, nil, nil, ChainConfig{}, log))
	spanAndTimeout := allocsThrough(t, []message.HandlerMiddleware{TracingMiddleware(dom.Queue), TimeoutMiddleware(0)})
	t.Logf("the chain allocates %v a message, its span and timeout alone %v", chain, spanAndTimeout)
	require.LessOrEqual(t, chain, spanAndTimeout, "the chain allocates %v a message, its span and timeout alone %v", chain, spanAndTimeout)
}
