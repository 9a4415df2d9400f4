package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// copyAtReturn is what a test middleware outside the chain found in a
// queue when the chain answered nil, before the router acked.
type copyAtReturn struct {
	d   messaging.Delivery
	ok  bool
	err error
}

// probeQueue is a middleware for the outside of a chain: when the chain
// answers nil (the router acks next), it takes what is in queue then.
func probeQueue(b *testBundle, queue string, found chan<- copyAtReturn) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err == nil {
				d, ok, gerr := b.get(queue)
				found <- copyAtReturn{d, ok, gerr}
			}
			return out, err
		}
	}
}

// A failed delivery's copy is in the retry queue, with the retry header + 1
// and lastError, before the router acks the original: while the broker's
// confirm of the copy is held back the original stays unanswered, and when
// the chain answers the copy is in the queue. The handler saw the retry
// header parsed.
func TestRouterRetryCopyIsConfirmedBeforeTheAck(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	pub, proxy := proxied(t, b, messaging.PublisherConfig{Timeout: time.Minute})
	t.Cleanup(func() { _ = pub.Close() })
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	seen := make(chan messaging.Delivery, 1)
	found := make(chan copyAtReturn, 1)
	f := newFeeder()
	chain := append([]message.HandlerMiddleware{probeQueue(b, dom.RetryQueue, found)}, messaging.MainChain(dom, pub, m, messaging.ChainConfig{}, b.log)...)
	runRouter(t, f, testRoute{queue: "email", chain: chain, handler: func(ctx context.Context, d messaging.Delivery) error {
		seen <- d
		return errors.New("smtp refused")
	}})

	proxy.Pause() // the copy's publish and its confirm are held
	msg := f.feed(t, "email", delivery(dom.Queue, "m-copy", emailBody, amqp.Table{
		dom.RetryHeader: int32(1), messaging.HeaderTraceID: "trace-1", messaging.HeaderTypeID: dom.TypeID,
	}))
	h := <-seen
	require.Equal(t, 1, h.Retry, "the handler sees the retry header parsed")
	require.Empty(t, h.IsleID, "a delivery with an id gets none of its own")
	require.Never(t, func() bool {
		select {
		case <-msg.Acked():
			return true
		case <-msg.Nacked():
			return true
		default:
			return false
		}
	}, 300*time.Millisecond, poll, "answered before the copy was confirmed")
	proxy.Resume()
	require.True(t, acked(t, msg), "the original is acked once the copy is confirmed")

	got := <-found
	require.NoError(t, got.err)
	require.True(t, got.ok, "the copy was in the retry queue when the chain answered, before the ack")
	c := got.d
	require.Equal(t, "m-copy", c.MessageID)
	require.Equal(t, "2", c.Headers[dom.RetryHeader])
	require.Equal(t, "smtp refused", c.Headers[messaging.HeaderLastError])
	require.NotContains(t, c.Headers, messaging.HeaderDeadReason)
	require.Equal(t, "trace-1", c.TraceID)
	require.Equal(t, dom.TypeID, c.TypeID)
	var body map[string]any
	require.NoError(t, json.Unmarshal(c.Body, &body))
	require.Equal(t, "smtp refused", body["lastError"])
	require.Equal(t, "LOGIN", body["scene"])
	require.Zero(t, b.depth(t, dom.DLQ))

	counts, observed := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeRetried: 1}, counts)
	require.EqualValues(t, 1, observed)
}

// A delivery whose producer set no id gets one of its own before the
// handler; its copy carries it, so handling the copy is keyed as handling
// the first delivery was.
func TestRouterIdlessDeliveryGetsAnIDItsCopyCarries(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	seen := make(chan messaging.Delivery, 2)
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "email", chain: messaging.MainChain(dom, b.pub, nil, messaging.ChainConfig{}, b.log),
		handler: func(ctx context.Context, d messaging.Delivery) error {
			seen <- d
			if d.Retry == 0 {
				return errors.New("first try fails")
			}
			return nil
		}})

	first := delivery(dom.Queue, "", emailBody, nil)
	require.True(t, strings.HasPrefix(first.MessageID, "sha256:"))
	require.Empty(t, first.IsleID, "the subscriber assigns no id")
	require.True(t, f.handle(t, "email", first))
	h := <-seen
	require.True(t, strings.HasPrefix(h.IsleID, first.MessageID+":"), h.IsleID)
	fromCtx := h.Key()
	require.Equal(t, h.IsleID, fromCtx)

	c := b.take(t, dom.RetryQueue)
	require.Equal(t, h.IsleID, c.MessageID, "the copy carries the delivery's own id")
	require.True(t, f.handle(t, "email", c))
	again := <-seen
	require.Empty(t, again.IsleID)
	require.Equal(t, h.Key(), again.Key(), "the copy is keyed as the first delivery")
}

// Retries spent, a huge retry header (clamped) and a Permanent error each
// send the copy to the DLQ, with its retry count and dead reason.
func TestRouterSpentOrPermanentFailuresGoToTheDLQWithTheirReason(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail) // max 3 retries
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	calls := newCounter()
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "email", chain: messaging.MainChain(dom, b.pub, m, messaging.ChainConfig{}, b.log),
		handler: jsonHandler(calls, func(int) error { return errors.New("down") })})

	for _, tc := range []struct {
		id, body        string
		retry           any
		wantRetry, want string
		lastError       string
	}{
		{"m-spent", emailBody, int32(3), "3", "retries exhausted (3 of 3)", "down"},
		{"m-huge", emailBody, int64(1) << 50, "1048576", "retries exhausted (1048576 of 3)", "down"},
		{"m-bad", "<xml>not json</xml>", nil, "0", "permanent: body is not JSON", "body is not JSON"},
	} {
		headers := amqp.Table{}
		if tc.retry != nil {
			headers[dom.RetryHeader] = tc.retry
		}
		require.True(t, f.handle(t, "email", delivery(dom.Queue, tc.id, tc.body, headers)), tc.id)
		c := b.take(t, dom.DLQ)
		require.Equal(t, tc.id, c.MessageID)
		require.Equal(t, tc.wantRetry, c.Headers[dom.RetryHeader], tc.id)
		require.Equal(t, tc.want, c.Headers[messaging.HeaderDeadReason], tc.id)
		require.Equal(t, tc.lastError, c.Headers[messaging.HeaderLastError], tc.id)
	}
	require.Zero(t, calls.get("m-bad"), "the handler never saw the bad body")
	require.Equal(t, 1, calls.get("m-huge"))
	require.Zero(t, b.depth(t, dom.RetryQueue))
	counts, _ := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeDead: 3}, counts)
}

// A panic is retried like an error; its stack is logged once, with the
// delivery's trace id.
func TestRouterPanicsAreRetriedLikeErrors(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainIdentityMaterial)
	log, logs := jsonLogger()
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "identity", chain: messaging.MainChain(dom, b.pub, m, messaging.ChainConfig{}, log),
		handler: func(ctx context.Context, d messaging.Delivery) error {
			var seen map[string]int
			seen[d.MessageID]++ //nolint:staticcheck // the panic under test: a nil map in the handler
			return nil
		}})
	body := `{"username":"u","certifyId":"c-1","materialInfo":"{}"}`
	require.True(t, f.handle(t, "identity", delivery(dom.Queue, "m-panic", body, amqp.Table{messaging.HeaderTraceID: "trace-p"})))

	c := b.take(t, dom.RetryQueue)
	require.Equal(t, "panic: assignment to entry in nil map", c.Headers[messaging.HeaderLastError])
	require.Equal(t, "1", c.Headers[dom.RetryHeader])
	panics := logs.LinesWith(t, "handler panicked")
	require.Len(t, panics, 1, "the stack is logged once")
	require.Equal(t, "m-panic", panics[0]["message_id"])
	require.Equal(t, "trace-p", panics[0]["correlation_id"])
	require.Contains(t, panics[0]["stack"], "TestRouterPanicsAreRetriedLikeErrors")
	retried := logs.Line(t, "message sent to the retry queue")
	require.NotNil(t, retried)
	require.Equal(t, "WARN", retried["level"])
	require.NotContains(t, retried, "stack")
	counts, _ := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeRetried: 1}, counts)
}

// A copy that cannot be published leaves the delivery to be nacked (and so
// requeued) after the requeue delay; nothing is copied.
func TestRouterCopyThatCannotBePublishedIsNackedAfterTheRequeueDelay(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	closed, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name() + "-closed"}, b.tp, b.metrics, b.log)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	log, logs := jsonLogger()
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	const delay = 200 * time.Millisecond
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "email", chain: messaging.MainChain(dom, closed, m, messaging.ChainConfig{RequeueDelay: delay}, log),
		handler: func(context.Context, messaging.Delivery) error { return errors.New("smtp refused") }})

	began := time.Now()
	require.False(t, f.handle(t, "email", delivery(dom.Queue, "m-stuck", emailBody, nil)), "nacked")
	require.GreaterOrEqual(t, time.Since(began), delay, "not before the requeue delay")
	line := logs.Line(t, "could not publish the copy; requeueing the delivery")
	require.NotNil(t, line)
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, "smtp refused", line["err"])
	require.Contains(t, line["publish_err"], messaging.ErrPublisherClosed.Error())
	require.Zero(t, b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ))
	counts, _ := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeRequeued: 1}, counts)
}

// A handler whose context the shutdown cancels is nacked at once, without
// a copy: the failure is the shutdown's.
func TestRouterShutdownRequeuesWithoutACopy(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	log, logs := jsonLogger()
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	started := make(chan struct{})
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "email", chain: messaging.MainChain(dom, b.pub, m, messaging.ChainConfig{RequeueDelay: time.Hour}, log),
		handler: func(ctx context.Context, d messaging.Delivery) error {
			close(started)
			<-ctx.Done() // a handler stuck on a slow dependency
			return ctx.Err()
		}})
	msg := f.feed(t, "email", delivery(dom.Queue, "m-slow", emailBody, amqp.Table{messaging.HeaderTraceID: "trace-s"}))
	<-started
	f.hardStop()
	require.False(t, acked(t, msg), "nacked, to be requeued")
	line := logs.Line(t, "handler canceled by shutdown; requeueing the delivery")
	require.NotNil(t, line)
	require.Equal(t, "WARN", line["level"])
	require.Equal(t, "trace-s", line["correlation_id"])
	require.Zero(t, b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ), "nothing retried or dead-lettered by the shutdown")
	counts, _ := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeRequeued: 1}, counts)
}

// A handler that runs out of its time fails like any other: it is retried,
// not taken for a shutdown.
func TestRouterHandlerTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "email", chain: messaging.MainChain(dom, b.pub, m, messaging.ChainConfig{HandlerTimeout: 50 * time.Millisecond}, b.log),
		handler: func(ctx context.Context, d messaging.Delivery) error {
			<-ctx.Done()
			return ctx.Err()
		}})
	require.True(t, f.handle(t, "email", delivery(dom.Queue, "m-late", emailBody, nil)))
	c := b.take(t, dom.RetryQueue)
	require.Equal(t, context.DeadlineExceeded.Error(), c.Headers[messaging.HeaderLastError])
	counts, _ := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeRetried: 1}, counts)
}

// Usage stats has no retry queue: a failure is logged and counted, and the
// message acked.
func TestRouterDomainWithoutRetryAcksFailures(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	require.False(t, dom.HasRetry())
	log, logs := jsonLogger()
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "usage", chain: messaging.MainChain(dom, b.pub, m, messaging.ChainConfig{}, log),
		handler: func(context.Context, messaging.Delivery) error { return errors.New("db down") }})
	require.True(t, f.handle(t, "usage", delivery(dom.Queue, "m-usage", `{"modelName":"m"}`, nil)))
	line := logs.Line(t, "handler failed; the domain has no retry")
	require.NotNil(t, line)
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, "db down", line["err"])
	require.Zero(t, b.depth(t, dom.Queue))
	counts, observed := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeFailed: 1}, counts)
	require.EqualValues(t, 1, observed)
}

// Every line logged with a handler's context carries the delivery's trace
// id, though neither the handler nor the middleware names it: the handler's
// own line, the recoverer's panic line and the retry line.
func TestRouterLogLinesCarryTheDeliverysTraceID(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	log, logs := jsonLogger()
	calls := newCounter()
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "email", chain: messaging.MainChain(dom, b.pub, nil, messaging.ChainConfig{}, log),
		handler: func(ctx context.Context, d messaging.Delivery) error {
			if calls.see(d) == 1 {
				panic("first call")
			}
			log.InfoContext(ctx, "inside the handler", "n", 1)
			return nil
		}})

	require.True(t, f.handle(t, "email", delivery(dom.Queue, "m-traced", emailBody, amqp.Table{messaging.HeaderTraceID: "trace-7"})))
	require.True(t, f.handle(t, "email", b.take(t, dom.RetryQueue)), "the copy carries the trace id")
	for _, msg := range []string{"inside the handler", "handler panicked", "message sent to the retry queue"} {
		line := logs.Line(t, msg)
		require.NotNil(t, line, msg)
		require.Equal(t, "trace-7", line["correlation_id"], msg)
		require.NotContains(t, line, "request_id", msg)
	}
	for _, raw := range logs.Lines() {
		require.LessOrEqual(t, strings.Count(raw, `"correlation_id":`), 1, raw)
	}
}

// CorrelationMiddleware alone puts the trace id in the context: of the
// Delivery the context carries, or, for a message from another subscriber,
// of its x-trace-id metadata.
func TestRouterCorrelationPutsTheTraceIDInTheContext(t *testing.T) {
	t.Parallel()
	log, logs := jsonLogger()
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "any", chain: []message.HandlerMiddleware{messaging.CorrelationMiddleware},
		handler: func(ctx context.Context, d messaging.Delivery) error {
			log.InfoContext(ctx, "handled", "id", d.MessageID)
			return nil
		}})

	withDelivery := message.NewMessage("m-ctx", []byte(`{}`))
	withDelivery.SetContext(messaging.ContextWith(context.Background(), messaging.Delivery{MessageID: "m-ctx", TraceID: "trace-ctx"}))
	require.Empty(t, correlation.CorrelationID(withDelivery.Context()))
	require.True(t, acked(t, f.send(t, "any", withDelivery)))

	foreign := message.NewMessage("m-foreign", []byte(`{}`))
	foreign.Metadata.Set(messaging.HeaderTraceID, "trace-md")
	require.True(t, acked(t, f.send(t, "any", foreign)))

	byID := map[string]string{}
	for _, line := range logs.LinesWith(t, "handled") {
		byID[line["id"].(string)], _ = line["correlation_id"].(string)
	}
	require.Equal(t, map[string]string{"m-ctx": "trace-ctx", "m-foreign": "trace-md"}, byID)
}

// A message that always fails goes round the real retry queue (its TTL,
// the x-death headers it adds) max + 1 times, then to the DLQ, whose chain
// stores it whole.
func TestRouterAlwaysFailingMessageIsCalledMaxPlusOneTimesThenStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail) // max 3 retries
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	cfg := messaging.ChainConfig{RequeueDelay: 50 * time.Millisecond}
	calls := newCounter()
	f := newFeeder()
	runRouter(t, f,
		testRoute{queue: "email", chain: messaging.MainChain(dom, b.pub, m, cfg, b.log),
			handler: jsonHandler(calls, func(n int) error { return fmt.Errorf("smtp refused, attempt %d", n) })},
		testRoute{queue: "email-dlq", chain: messaging.DeadLetterChain(dom, m, cfg, b.log),
			handler: handlers.NewDeadLetters(b.db, dom, b.log).Handle})

	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-always", TypeID: dom.TypeID}))
	for n := 1; n <= dom.Retry.MaxRetries+1; n++ {
		require.True(t, f.handle(t, "email", b.take(t, dom.Queue)), "attempt %d acked", n)
		calls.mu.Lock()
		last := calls.last["m-always"]
		calls.mu.Unlock()
		require.Equal(t, n-1, last.Retry, "attempt %d sees the retry header", n)
		if n > 1 {
			require.Equal(t, fmt.Sprintf("smtp refused, attempt %d", n-1), last.Headers[messaging.HeaderLastError])
			require.Contains(t, last.Headers["x-death"], `"reason":"expired"`, "it came back through the retry queue's TTL")
		}
	}
	require.Equal(t, dom.Retry.MaxRetries+1, calls.get("m-always"))
	require.True(t, f.handle(t, "email-dlq", b.take(t, dom.DLQ)), "stored and acked")

	rows := b.deadLetters(t, dom)
	require.Len(t, rows, 1)
	row := rows[0]
	require.Equal(t, 3, row.RetryCount)
	require.NotNil(t, row.LastError)
	require.Equal(t, "smtp refused, attempt 4", *row.LastError)
	require.Equal(t, dom.DLQ, row.Queue)
	require.Equal(t, "m-always", row.MessageID)
	require.Equal(t, "a@example.com", row.Subject)
	require.Equal(t, dom.TypeID, row.MessageType)
	var body map[string]any
	require.NoError(t, json.Unmarshal(row.Body, &body))
	require.Equal(t, "smtp refused, attempt 4", body["lastError"])
	require.Equal(t, "LOGIN", body["scene"])
	var headers map[string]any
	require.NoError(t, json.Unmarshal([]byte(row.Headers), &headers))
	require.EqualValues(t, 3, headers[dom.RetryHeader], "the retry count travels as a number")
	require.Equal(t, "retries exhausted (3 of 3)", headers[messaging.HeaderDeadReason])
	require.NotContains(t, headers, "x-death", "copies do not carry death headers")
	require.Zero(t, b.depth(t, dom.Queue)+b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ))

	counts, observed := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeRetried: 3, messaging.OutcomeDead: 1, messaging.OutcomeStored: 1}, counts)
	require.EqualValues(t, 5, observed)
}

// The DLQ chain stores a dead message (once, though redelivered); a
// failure to store requeues it after the requeue delay, and a Permanent one
// is logged as a message that cannot be stored whole and counted failed.
func TestRouterDeadLetterChainStoresOrRequeues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	log, logs := jsonLogger()
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	const delay = 100 * time.Millisecond
	cfg := messaging.ChainConfig{RequeueDelay: delay}
	f := newFeeder()
	seen := make(chan messaging.Delivery, 1)
	runRouter(t, f,
		testRoute{queue: "store", chain: messaging.DeadLetterChain(dom, m, cfg, log), handler: handlers.NewDeadLetters(b.db, dom, log).Handle},
		testRoute{queue: "down", chain: messaging.DeadLetterChain(dom, m, cfg, log), handler: func(ctx context.Context, d messaging.Delivery) error {
			seen <- d
			return errors.New("mysql down")
		}},
		testRoute{queue: "whole", chain: messaging.DeadLetterChain(dom, m, cfg, log), handler: func(context.Context, messaging.Delivery) error {
			return messaging.Permanent(errors.New("packet too large"))
		}})

	dead := delivery(dom.DLQ, "m-dead", emailBody, amqp.Table{
		dom.RetryHeader: int32(2), messaging.HeaderLastError: "smtp down", messaging.HeaderTraceID: "trace-d",
	})
	require.True(t, f.handle(t, "store", dead), "stored and acked")
	require.True(t, f.handle(t, "store", dead), "a redelivery is acked")
	rows := b.deadLetters(t, dom)
	require.Len(t, rows, 1, "stored once")
	require.Equal(t, 2, rows[0].RetryCount)
	require.Equal(t, "smtp down", *rows[0].LastError)
	require.Equal(t, "trace-d", rows[0].TraceID)
	var headers map[string]any
	require.NoError(t, json.Unmarshal([]byte(rows[0].Headers), &headers))
	require.EqualValues(t, 2, headers[dom.RetryHeader], "headers kept as JSON, types kept")

	began := time.Now()
	require.False(t, f.handle(t, "down", dead), "nacked, to be requeued")
	require.GreaterOrEqual(t, time.Since(began), delay, "not before the requeue delay")
	d := <-seen
	require.Equal(t, 2, d.Retry)
	require.NotEqual(t, "{}", d.HeadersJSON, "the handler gets the headers as JSON")
	line := logs.Line(t, "could not store a dead message; requeueing it")
	require.NotNil(t, line)
	require.Equal(t, "m-dead", line["message_id"])
	require.Equal(t, "trace-d", line["correlation_id"])

	require.False(t, f.handle(t, "whole", dead), "nacked: it stays in the DLQ")
	line = logs.Line(t, "dead message cannot be stored whole; it stays in the DLQ and is tried again")
	require.NotNil(t, line)
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, "m-dead", line["message_id"])
	require.EqualValues(t, len(emailBody), line["bytes"])
	require.Equal(t, "packet too large", line["err"])

	counts, observed := outcomes(t, reg, dom.Name)
	require.Equal(t, map[string]float64{messaging.OutcomeStored: 2, messaging.OutcomeRequeued: 1, messaging.OutcomeFailed: 1}, counts)
	require.EqualValues(t, 4, observed)
}

// A message the broker dead-lettered itself (a quorum queue's delivery
// limit) carries no dead reason of Isle's: the DLQ chain stores the
// broker's as its reason, so operators and balance-sync see why it died.
func TestDeadLetterChainKeepsTheBrokersReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	f := newFeeder()
	runRouter(t, f, testRoute{queue: "store", chain: messaging.DeadLetterChain(dom, b.metrics, messaging.ChainConfig{}, b.log),
		handler: handlers.NewDeadLetters(b.db, dom, b.log).Handle})
	require.True(t, f.handle(t, "store", delivery(dom.DLQ, "m-limit", emailBody, amqp.Table{
		"x-first-death-reason": "delivery_limit", "x-first-death-queue": dom.Queue,
	})))
	require.True(t, f.handle(t, "store", delivery(dom.DLQ, "m-ours", emailBody, amqp.Table{
		messaging.HeaderDeadReason: "permanent: bad address", "x-first-death-reason": "delivery_limit",
	})))
	reasons := map[string]any{}
	for _, row := range b.deadLetters(t, dom) {
		var headers map[string]any
		require.NoError(t, json.Unmarshal([]byte(row.Headers), &headers))
		reasons[row.MessageID] = headers[messaging.HeaderDeadReason]
	}
	require.Equal(t, map[string]any{
		"m-limit": "broker: delivery_limit (queue " + dom.Queue + ")",
		"m-ours":  "permanent: bad address",
	}, reasons)
}
