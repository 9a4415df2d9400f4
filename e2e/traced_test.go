package e2e_test

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// post sends body as JSON to path of f's API, with token as its bearer
// (none when empty) and headers (a traceparent, baggage, ...), and
// requires an answer below 300.
func (f *billingFleet) post(t *testing.T, path, body, token string, headers map[string]string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+f.addr+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, path)
}

// publishSpringEmail publishes an email code message as a Spring producer
// sends it, with message id id and traceparent.
func (f *billingFleet) publishSpringEmail(t *testing.T, id, traceparent string) {
	t.Helper()
	dom, _ := f.tp.Domain(topology.DomainEmail)
	body, err := topology.Encode(topology.EmailCodeDispatch{TraceID: id, Email: id + "@example.test", Scene: "LOGIN",
		Code: "123456", CreatedAtEpochSeconds: time.Now().Unix()})
	require.NoError(t, err)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.PublishWithContext(context.Background(), dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
		ContentType: "application/json", Body: body, MessageId: id,
		Headers: amqp.Table{"__TypeId__": dom.TypeID, "traceparent": traceparent, "x-trace-id": id},
	}))
}

// takeMessage takes a message from queue (acked), waiting for one.
func takeMessage(t *testing.T, conn *amqp.Connection, queue string) amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var d amqp.Delivery
	require.Eventually(t, func() bool {
		var ok bool
		d, ok, err = ch.Get(queue, true)
		require.NoError(t, err)
		return ok
	}, 10*time.Second, 50*time.Millisecond, "a message in %s", queue)
	return d
}

// chargeTrace is the trace id of traceScene's charge, sent by its caller.
const chargeTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

// traceScene is what the tests of a trace backend (the viewer, Jaeger)
// look for in it: a fleet whose api, worker and relay export to otlp, a
// charge made in the caller's trace chargeTrace, and an order paid through
// a simulated callback, whose trace reaches the receipt mail.
type traceScene struct {
	f                                 *billingFleet
	billing, usage, notices, receipts topology.Domain
}

func newTraceScene(t *testing.T, otlp string) *traceScene {
	t.Helper()
	traced := func(e fleetEnv) {
		e["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp
		e["OTEL_BSP_SCHEDULE_DELAY"] = "50"
	}
	var keys string
	f := newBillingFleet(t, map[string]string{"alice": "100000", "rosa": "0"}, func(ae fleetEnv) { keys = payKeys(t, ae); traced(ae) })
	te := maps.Clone(f.env)
	traced(te)
	start(t, te, "worker", "-handlers", "agent-billing,agent-usage-stats,payment-notify,payment-receipt").waitFor(t, 30*time.Second, "worker started")
	start(t, te, "relay").waitFor(t, 30*time.Second, "relay started")

	f.post(t, "/v1/agent/usage", `{"requestId":"scene-1","username":"alice","modelName":"gpt-test","inputTokens":1200,"outputTokens":300}`,
		f.token, map[string]string{"traceparent": "00-" + chargeTrace + "-00f067aa0ba902b7-01"})
	rosa := f.userToken(t, "rosa")
	no := f.payOrder(t, rosa, order.ProductAgentRecharge, order.ChannelAlipay, 5000, "rosa@example.com")
	ctl := maps.Clone(f.env)
	ctl["API_ADDR"] = f.addr
	out, code := islectl(t, ctl, "pay", "simulate", "-dir", keys, "-order", no, "-notify-id", "nid-scene", "-transaction-id", "2026120322003")
	require.Zero(t, code, out)

	sc := &traceScene{f: f}
	sc.billing, _ = f.tp.Domain(topology.DomainAgentBilling)
	sc.usage, _ = f.tp.Domain(topology.DomainAgentUsageStats)
	sc.notices, _ = f.tp.Domain(topology.DomainPaymentNotify)
	sc.receipts, _ = f.tp.Domain(topology.DomainPaymentReceipt)
	return sc
}
