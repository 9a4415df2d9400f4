package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

const emailBody = `{"traceId":"t-1","email":"a@example.com","scene":"LOGIN","code":"123456","createdAtEpochSeconds":1764417662,"lastError":null}`

// jsonHandler refuses bodies that are not JSON, as the typed decoders do.
func jsonHandler(c *counter, fail func(call int) error) messaging.HandlerFunc {
	return func(ctx context.Context, d messaging.Delivery) error {
		if !json.Valid(d.Body) {
			return messaging.Permanent(errors.New("body is not JSON"))
		}
		return fail(c.see(d))
	}
}

func TestMessageThatFailsTwiceIsCalledThreeTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	calls := newCounter()
	w := b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, jsonHandler(calls, func(n int) error {
		if n <= 2 {
			return errors.New("temporary")
		}
		return nil
	}))...)
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-twice"}))
	require.Eventually(t, func() bool { return calls.get("m-twice") == 3 }, 10*time.Second, poll, "not called 3 times: %d", calls.get("m-twice"))
	// Stopped, the subscriber gives back what it holds unanswered: a fourth
	// call is counted by now, and a copy still to come is in a queue.
	require.NoError(t, w.stop())
	require.Equal(t, 3, calls.get("m-twice"))
	require.Zero(t, b.depth(t, dom.Queue)+b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ), "nothing left to come")
	require.Empty(t, b.deadLetters(t, dom))
	calls.mu.Lock()
	last := calls.last["m-twice"]
	calls.mu.Unlock()
	require.Equal(t, 2, last.Retry, "the third call sees retry header 2")
	require.Equal(t, "temporary", last.Headers[messaging.HeaderLastError])
}

func TestUndecodableBodyGoesToTheDLQAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainMiniGameScore)
	calls := newCounter()
	b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, jsonHandler(calls, func(int) error { return nil }))...)
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte("<xml>not json</xml>"), MessageID: "m-bad"}))
	require.Eventually(t, func() bool { return len(b.deadLetters(t, dom)) == 1 }, 5*time.Second, poll, "no DLQ row")
	row := b.deadLetters(t, dom)[0]
	require.Equal(t, 0, row.RetryCount)
	require.Equal(t, "<xml>not json</xml>", string(row.Body), "the raw body is kept")
	require.Equal(t, "body is not JSON", *row.LastError)
	require.Zero(t, calls.get("m-bad"))
	m, c := calls.total()
	require.Zero(t, m+c, "the handler never saw it")
}

// A message the broker dead-lettered itself arrives with an x-death array
// (and x-first-death-* headers); it is handled like any other.
func TestBrokerDeadLetteredMessageIsHandled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainPaymentReceipt)
	calls := newCounter()
	b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, jsonHandler(calls, func(int) error { return nil }))...)

	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	bounce := dom.Queue + ".bounce"
	_, err = ch.QueueDeclare(bounce, false, true, false, false, amqp.Table{
		"x-message-ttl": int32(50), "x-dead-letter-exchange": dom.Exchange, "x-dead-letter-routing-key": dom.RoutingKey,
	})
	require.NoError(t, err)
	body := `{"traceId":"t","email":"r@example.com","outTradeNo":"o-1","channel":"ALIPAY","amountFen":1500,"currency":"CNY","productCode":"pro-month"}`
	require.NoError(t, ch.Publish("", bounce, false, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: "m-bounced", Body: []byte(body),
	}))
	require.Eventually(t, func() bool { return calls.get("m-bounced") == 1 }, 5*time.Second, poll, "dead-lettered message not handled")
	calls.mu.Lock()
	d := calls.last["m-bounced"]
	calls.mu.Unlock()
	require.Contains(t, d.Headers["x-death"], `"reason":"expired"`)
	require.Equal(t, bounce, d.Headers["x-first-death-queue"])
	require.Empty(t, b.deadLetters(t, dom))
}

// Headers of every AMQP type never stop a delivery before its handler.
func TestEveryHeaderTypeIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentBilling)
	calls := newCounter()
	b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, jsonHandler(calls, func(int) error { return nil }))...)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	headers := amqp.Table{
		"long": int64(1) << 40, "int": int32(-7), "short": int16(3), "byte": int8(1), "ubyte": uint8(9),
		"bool": true, "float": float32(1.5), "double": 2.25, "bytes": []byte{0, 1, 2},
		"time": time.Unix(1764417662, 0), "decimal": amqp.Decimal{Scale: 2, Value: 12345},
		"table": amqp.Table{"nested": amqp.Table{"n": int64(1)}}, "array": []any{"a", int32(1), amqp.Table{"k": "v"}},
		"void": nil, dom.RetryHeader: "not-a-number",
	}
	require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
		Headers: headers, ContentType: "application/json", MessageId: "m-types",
		Body: []byte(`{"username":"u","amountFen":"0.5","modelName":"m","inputTokens":1,"outputTokens":1}`),
	}))
	require.Eventually(t, func() bool { return calls.get("m-types") == 1 }, 5*time.Second, poll, "not handled")
	calls.mu.Lock()
	d := calls.last["m-types"]
	calls.mu.Unlock()
	require.Equal(t, "1099511627776", d.Headers["long"])
	require.Equal(t, "123.45", d.Headers["decimal"])
	require.Equal(t, "2025-11-29T12:01:02Z", d.Headers["time"])
	require.JSONEq(t, `{"nested":{"n":1}}`, d.Headers["table"])
	require.Equal(t, 0, d.Retry, "a non-numeric retry header counts as 0")
}

func TestRetryHeaderIsParsedDefensively(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"": 0, "2": 2, "-5": 0, "abc": 0, "3.0": 3, "99999999999999999999": messaging.MaxRetryHeader, " 4 ": 4} {
		require.Equal(t, want, messaging.ParseRetry(in), "%q", in)
	}
	b := setup(t)
	dom := b.domain(t, topology.DomainMiniGameScore)
	calls := newCounter()
	b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, jsonHandler(calls, func(int) error { return errors.New("down") }))...)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	// A huge count is clamped, so the first failure goes to the DLQ.
	require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
		Headers: amqp.Table{dom.RetryHeader: int64(1) << 50}, MessageId: "m-huge", Body: []byte(`{"submitId":"s"}`),
	}))
	require.Eventually(t, func() bool { return len(b.deadLetters(t, dom)) == 1 }, 5*time.Second, poll, "no DLQ row")
	require.Equal(t, 1, calls.get("m-huge"))
}
