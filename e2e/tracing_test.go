package e2e_test

import (
	"bytes"
	"compress/gzip"
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

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
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
	ok := assert.Eventually(t, func() bool {
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
	}, 30*time.Second, 50*time.Millisecond)
	if !ok {
		// The spans as they are now, not as they were when the wait began.
		t.Fatalf("spans of %s: got %v", what, c.all())
	}
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
	f.post(t, "/v1/agent/usage", `{"requestId":"traced-1","username":"alice","modelName":"gpt-test","inputTokens":10,"outputTokens":0}`,
		f.token, map[string]string{"traceparent": "00-" + traceID + "-" + parent + "-01"})

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
	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	f.publishSpringEmail(t, "spring-traced-1", "00-"+traceID+"-"+parent+"-01")

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

// An upload's trace reaches its replication through object_outbox: the
// row keeps the trace context of the transaction that wrote it, the
// relay's publish continues it, and so does the worker that copies the
// object.
func TestTracesCrossTheObjectOutboxToTheReplication(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	f := newBillingFleet(t, nil, c.tracingEnv)
	te := maps.Clone(f.env)
	c.tracingEnv(te)
	start(t, te, "worker", "-handlers", "object-replication").waitFor(t, 30*time.Second, "worker started")
	start(t, te, "relay").waitFor(t, 30*time.Second, "relay started")

	f.upload(t, f.userToken(t, "una"), store.KindAvatar, images.SamplePNG(64, 7))
	upload := c.waitFor(t, "the upload", func(s span) bool {
		return s.service == "isle-api" && s.kind == tracepb.Span_SPAN_KIND_SERVER && strings.Contains(s.name, "/v1/objects")
	})[0]
	dom, _ := f.tp.Domain(topology.DomainObjectReplication)
	in := func(service string, kind tracepb.Span_SpanKind, name string) func(span) bool {
		return func(s span) bool {
			return s.traceID == upload.traceID && s.service == service && s.kind == kind && strings.Contains(s.name, name)
		}
	}
	got := c.waitFor(t, "the replication",
		in("isle-api", tracepb.Span_SPAN_KIND_CLIENT, "mysql transaction"),
		in("isle-relay", tracepb.Span_SPAN_KIND_PRODUCER, dom.RoutingKey),
		in("isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, dom.Queue),
	)
	tx, relayed, replicated := got[0], got[1], got[2]
	require.Equal(t, upload.id, tx.parent, "the object's transaction runs inside the upload")
	require.Equal(t, tx.id, relayed.parent, "the relay continues the transaction that wrote the row")
	require.Equal(t, relayed.id, replicated.parent, "the worker continues the relay's publish")
}

// Sampling as the compose file and the Kubernetes manifests set it
// (parentbased_traceidratio), at a ratio of 0 in the api and 1 in the
// worker: a request that comes without a trace is sampled out in the api,
// and the worker, which would sample every trace that starts in it, keeps
// that decision because the context reaches it; one that comes sampled (a
// client's traceparent, a Spring producer's message) is recorded in every
// binary it crosses.
func TestSamplingKeepsTheParentsDecision(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	sampling := func(ratio string) func(fleetEnv) {
		return func(e fleetEnv) {
			c.tracingEnv(e)
			e["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
			e["OTEL_TRACES_SAMPLER_ARG"] = ratio
		}
	}
	f := newBillingFleet(t, map[string]string{"alice": "100000"}, sampling("0"))
	we := maps.Clone(f.env)
	sampling("1")(we)
	start(t, we, "worker", "-handlers", "agent-billing,agent-usage-stats,email").waitFor(t, 30*time.Second, "worker started")

	charge := func(id string, headers map[string]string) {
		t.Helper()
		f.post(t, "/v1/agent/usage", `{"requestId":"`+id+`","username":"alice","modelName":"gpt-test","inputTokens":10,"outputTokens":0}`,
			f.token, headers)
	}
	charge("unsampled-1", nil) // first: its spans, were any recorded, would be exported before the next's
	const traceID, spring = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	charge("sampled-1", map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	f.publishSpringEmail(t, "spring-sampled-1", "00-"+spring+"-b7ad6b7169203331-01")
	dom, _ := f.tp.Domain(topology.DomainEmail)

	billing, _ := f.tp.Domain(topology.DomainAgentBilling)
	in := func(trace, service string, kind tracepb.Span_SpanKind, name string) func(span) bool {
		return func(s span) bool {
			return s.traceID == trace && s.service == service && s.kind == kind && strings.Contains(s.name, name)
		}
	}
	c.waitFor(t, "the sampled charge and the Spring message",
		in(traceID, "isle-api", tracepb.Span_SPAN_KIND_SERVER, "POST /v1/agent/usage"),
		in(traceID, "isle-api", tracepb.Span_SPAN_KIND_PRODUCER, billing.RoutingKey),
		in(traceID, "isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, billing.Queue),
		in(spring, "isle-worker", tracepb.Span_SPAN_KIND_CONSUMER, dom.Queue),
	)
	for _, s := range c.all() {
		// The worker's group commits are traces of their own (a root with
		// links, and its transactions): only the messages' spans count.
		if s.service == "isle-api" || s.kind == tracepb.Span_SPAN_KIND_CONSUMER || s.kind == tracepb.Span_SPAN_KIND_PRODUCER {
			require.Contains(t, []string{traceID, spring}, s.traceID, "a span of the charge sampled out in the api: %v", s)
		}
	}
}

// At the public edge a caller Isle does not trust with its traces (here an
// anonymous client asking for an email code) gets a trace of Isle's own,
// linked to the one it sent, and its baggage and tracestate do not reach
// the broker; a service-role caller (the agent gateway) goes on in its own
// trace, baggage included.
func TestPublicCallersStartTheirOwnTrace(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	f := newBillingFleet(t, map[string]string{"alice": "100000"}, c.tracingEnv)
	const anonTrace, gatewayTrace = "11111111111111111111111111111111", "22222222222222222222222222222222"
	send := func(path, body, token, trace string) {
		t.Helper()
		f.post(t, path, body, token, map[string]string{"traceparent": "00-" + trace + "-00f067aa0ba902b7-01",
			"tracestate": "vendor=secret", "baggage": "user.secret=42"})
	}
	send("/v1/auth/email-codes", `{"email":"edge@example.com","scene":"LOGIN"}`, "", anonTrace)
	send("/v1/agent/usage", `{"requestId":"edge-1","username":"alice","modelName":"gpt-test","inputTokens":10,"outputTokens":0}`, f.token, gatewayTrace)

	// The messages as they are in their queues (no worker runs here).
	message := func(domain string) amqp.Delivery {
		t.Helper()
		dom, _ := f.tp.Domain(domain)
		return takeMessage(t, f.conn, dom.Queue)
	}
	mail := message(topology.DomainEmail)
	require.NotContains(t, mail.Headers["traceparent"], anonTrace, "an anonymous caller's trace is not continued")
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, mail.Headers["traceparent"], "the message carries Isle's own trace")
	require.NotContains(t, mail.Headers, "baggage")
	require.NotContains(t, mail.Headers, "tracestate")
	charge := message(topology.DomainAgentBilling)
	require.Contains(t, charge.Headers["traceparent"], gatewayTrace, "the gateway's trace goes on")
	require.Equal(t, "user.secret=42", charge.Headers["baggage"])

	// The anonymous request's span begins a trace linked to the caller's.
	ownTrace := strings.Split(mail.Headers["traceparent"].(string), "-")[1]
	c.waitFor(t, "the anonymous request", func(s span) bool {
		return s.service == "isle-api" && s.kind == tracepb.Span_SPAN_KIND_SERVER && s.traceID == ownTrace && slices.Contains(s.links, anonTrace)
	})
}
