package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP receiver: the binaries export their spans to
// it as they would to Jaeger or an OpenTelemetry collector
// (doc/tracing.md), and the test reads what arrived.
type collector struct {
	url   string
	mu    sync.Mutex
	spans []span
}

// span is one exported span with the service that sent it.
type span struct {
	service             string
	traceID, id, parent string
	name                string
	kind                tracepb.Span_SpanKind
	links               []string // trace ids of its links
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.url = "http://" + l.Addr().String()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.add(&req)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

func (c *collector) add(req *collectortrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{service: service, traceID: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName(), kind: s.GetKind()}
				for _, l := range s.GetLinks() {
					sp.links = append(sp.links, hex.EncodeToString(l.GetTraceId()))
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
}

// waitFor waits until spans matching every one of want arrived, and
// returns them in want's order.
func (c *collector) waitFor(t *testing.T, what string, want ...func(span) bool) []span {
	t.Helper()
	var found []span
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		found = found[:0]
		for _, w := range want {
			i := -1
			for j, s := range c.spans {
				if w(s) {
					i = j
					break
				}
			}
			if i < 0 {
				return false
			}
			found = append(found, c.spans[i])
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "spans of %s: got %v", what, c.all())
	return found
}

func (c *collector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

// tracingEnv points a binary's exporter at c, flushing spans at once.
func (c *collector) tracingEnv(e fleetEnv) {
	e["OTEL_EXPORTER_OTLP_ENDPOINT"] = c.url
	e["OTEL_BSP_SCHEDULE_DELAY"] = "50"
}

// A client's traceparent on POST /v1/agent/usage: the API's server span,
// its deduct.lua, its publishes and the worker's consumer spans all belong
// to that trace, and the group commit's MySQL transaction links to it.
func TestTracesFollowAChargeToMySQL(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	f := newBillingFleet(t, map[string]string{"alice": "100000"}, c.tracingEnv)
	we := maps.Clone(f.env)
	c.tracingEnv(we)
	w := start(t, we, "worker", "-handlers", "agent-billing,agent-usage-stats")
	w.waitFor(t, 30*time.Second, "worker started")

	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"requestId":"traced-1","username":"alice","modelName":"gpt-test","inputTokens":10,"outputTokens":0}`
	req, err := http.NewRequest(http.MethodPost, "http://"+f.addr+"/v1/agent/usage", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	billing, _ := f.tp.Domain(topology.DomainAgentBilling)
	usage, _ := f.tp.Domain(topology.DomainAgentUsageStats)
	in := func(service string, kind tracepb.Span_SpanKind, name string) func(span) bool {
		return func(s span) bool {
			return s.traceID == traceID && s.service == service && s.kind == kind && strings.Contains(s.name, name)
		}
	}
	got := c.waitFor(t, "a charge",
		in("isle-api", tracepb.Span_SPAN_KIND_SERVER, "POST /v1/agent/usage"),
		in("isle-api", tracepb.Span_SPAN_KIND_CLIENT, "redis deduct.lua"),
		in("isle-api", tracepb.Span_SPAN_KIND_PRODUCER, billing.RoutingKey),
		in("isle-api", tracepb.Span_SPAN_KIND_PRODUCER, usage.RoutingKey),
		in("isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, billing.Queue),
		in("isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, usage.Queue),
		func(s span) bool {
			return s.service == "isle-worker" && s.name == "mysql debits" && slices.Contains(s.links, traceID)
		},
	)
	server, deduct, published, consumed := got[0], got[1], got[2], got[4]
	require.Equal(t, parent, server.parent, "the server span continues the client's")
	require.Equal(t, server.id, deduct.parent, "deduct.lua runs inside the request")
	require.Equal(t, server.id, published.parent, "the publish runs inside the request")
	require.Equal(t, published.id, consumed.parent, "the worker continues the publish's span")
}

// A message published by a Spring-style producer with a traceparent
// header: the worker's consumer span continues that trace.
func TestTracesContinueASpringProducersTrace(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	f := newBillingFleet(t, nil)
	we := maps.Clone(f.env)
	c.tracingEnv(we)
	w := start(t, we, "worker", "-handlers", "email")
	w.waitFor(t, 30*time.Second, "worker started")

	dom, _ := f.tp.Domain(topology.DomainEmail)
	body, err := topology.Encode(topology.EmailCodeDispatch{TraceID: "spring-1", Email: "traced@example.test", Scene: "LOGIN",
		Code: "123456", CreatedAtEpochSeconds: time.Now().Unix()})
	require.NoError(t, err)
	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.PublishWithContext(context.Background(), dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
		ContentType: "application/json", Body: body, MessageId: "spring-traced-1",
		Headers: amqp.Table{"__TypeId__": dom.TypeID, "traceparent": "00-" + traceID + "-" + parent + "-01", "x-trace-id": "spring-1"},
	}))

	got := c.waitFor(t, "a Spring producer's message", func(s span) bool {
		return s.service == "isle-worker" && s.kind == tracepb.Span_SPAN_KIND_CONSUMER && s.traceID == traceID
	})
	require.Equal(t, parent, got[0].parent)
	require.Contains(t, got[0].name, dom.Queue)
	// The mail it sent is in the worker's log with the trace's ids.
	require.Eventually(t, func() bool { return bytes.Contains([]byte(w.output()), []byte(`"trace_id":"`+traceID+`"`)) },
		10*time.Second, 50*time.Millisecond, "a log line with the trace id:\n%s", w.output())
}

// A payment callback's trace reaches the receipt mail through the outbox:
// the worker that marks the order paid writes the receipt's outbox row in
// its transaction with that trace's context, the relay's publish continues
// it, and so does the worker that mails the receipt.
func TestTracesCrossTheOutboxToTheReceipt(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	var keys string
	f := newBillingFleet(t, map[string]string{"rosa": "0"}, func(ae fleetEnv) { keys = payKeys(t, ae); c.tracingEnv(ae) })
	te := maps.Clone(f.env)
	c.tracingEnv(te)
	start(t, te, "worker", "-handlers", "payment-notify,payment-receipt").waitFor(t, 30*time.Second, "worker started")
	start(t, te, "relay").waitFor(t, 30*time.Second, "relay started")

	rosa := f.userToken(t, "rosa")
	no := f.payOrder(t, rosa, order.ProductAgentRecharge, order.ChannelAlipay, 5000, "rosa@example.com")
	ctl := maps.Clone(f.env)
	ctl["API_ADDR"] = f.addr
	out, code := islectl(t, ctl, "pay", "simulate", "-dir", keys, "-order", no, "-notify-id", "nid-traced", "-transaction-id", "2026120222001")
	require.Zero(t, code, out)

	notify := c.waitFor(t, "the callback", func(s span) bool {
		return s.service == "isle-api" && s.kind == tracepb.Span_SPAN_KIND_SERVER && strings.Contains(s.name, "/v1/payments/notify/")
	})[0]
	receipts, _ := f.tp.Domain(topology.DomainPaymentReceipt)
	notices, _ := f.tp.Domain(topology.DomainPaymentNotify)
	in := func(service string, kind tracepb.Span_SpanKind, name string) func(span) bool {
		return func(s span) bool {
			return s.traceID == notify.traceID && s.service == service && s.kind == kind && strings.Contains(s.name, name)
		}
	}
	got := c.waitFor(t, "the receipt",
		in("isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, notices.Queue),
		in("isle-worker", tracepb.Span_SPAN_KIND_CLIENT, "mysql transaction"),
		in("isle-relay", tracepb.Span_SPAN_KIND_PRODUCER, receipts.RoutingKey),
		in("isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, receipts.Queue),
		in("isle-worker", tracepb.Span_SPAN_KIND_CLIENT, "mail send"),
	)
	applied, tx, relayed, mailed, sent := got[0], got[1], got[2], got[3], got[4]
	require.Equal(t, applied.id, tx.parent, "the transaction runs inside the notice's handling")
	require.Equal(t, tx.id, relayed.parent, "the relay continues the transaction that wrote the row")
	require.Equal(t, relayed.id, mailed.parent, "the receipt's worker continues the relay's publish")
	require.Equal(t, mailed.id, sent.parent, "the mail is sent inside the receipt's handling")
}
