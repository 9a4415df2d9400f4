package messaging_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// A message published the way Spring AMQP's Jackson converter publishes it
// (__TypeId__ header, no message id, numeric Jackson dates, camelCase) is
// consumed and decoded.
func TestSpringPublishedMessageIsConsumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainPaymentNotify)
	var mu sync.Mutex
	var got []topology.PaymentNotify
	var ids []string
	b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, messaging.Typed(func(ctx context.Context, m topology.PaymentNotify) error {
		d, _ := messaging.DeliveryFrom(ctx)
		mu.Lock()
		got = append(got, m)
		ids = append(ids, d.MessageID)
		mu.Unlock()
		return nil
	}))...)

	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	body := `{"notifyId":"n-1","channel":"WECHAT","outTradeNo":"EI2026112900001","transactionId":"4200002",` +
		`"tradeState":"SUCCESS","successTime":1764417662.123456789,"verifyOk":true,"rawBody":"{}","lastError":null,"futureField":[1,2]}`
	require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
		ContentType: "application/json", ContentEncoding: "UTF-8", DeliveryMode: amqp.Persistent, Priority: 0,
		Headers: amqp.Table{"__TypeId__": "com.eisland.server.payment.mq.PaymentNotifyMessage"},
		Body:    []byte(body),
	}))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, 5*time.Second, poll, "not consumed")
	m := got[0]
	require.Equal(t, "n-1", m.NotifyID)
	require.Equal(t, "EI2026112900001", m.OutTradeNo)
	require.True(t, m.VerifyOK)
	require.Equal(t, int64(1764417662), m.SuccessTime.Unix())
	require.Equal(t, 123456789, m.SuccessTime.Nanosecond())
	require.Regexp(t, `^sha256:[0-9a-f]{32}$`, ids[0], "no message_id: a stable key derived from the body")
	require.Empty(t, b.deadLetters(t, dom))
}

// A message Isle publishes carries the Spring backend's field names and ISO dates.
func TestIslePublishedMessageOnTheWire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainPaymentReceipt)
	amount := int32(1500)
	paid := time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8)
	require.NoError(t, b.pub.Publish(context.Background(), topology.PaymentReceiptDispatch{
		TraceID: "t-7", Email: "r@example.com", OutTradeNo: "EI1", Channel: "ALIPAY", TransactionID: "2026112922001",
		AmountFen: &amount, Currency: "CNY", ProductCode: "pro-month",
		PaidAt: topology.LocalDateTime{Time: paid}, ExpireAt: topology.LocalDateTime{Time: paid.AddDate(0, 0, 30)},
	}, messaging.Options{MessageID: "m-receipt", TraceID: "t-7"}))

	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var d amqp.Delivery
	// The condition runs on a goroutine of its own: it only fetches, and
	// the test goroutine asserts.
	require.Eventually(t, func() bool {
		var ok bool
		d, ok, err = ch.Get(dom.Queue, true)
		return ok || err != nil
	}, 5*time.Second, poll, "not published")
	require.NoError(t, err)
	require.JSONEq(t, `{
		"traceId": "t-7", "email": "r@example.com", "outTradeNo": "EI1", "channel": "ALIPAY",
		"transactionId": "2026112922001", "amountFen": 1500, "currency": "CNY", "productCode": "pro-month",
		"paidAt": "2026-11-29T20:01:02", "expireAt": "2026-12-29T20:01:02", "lastError": null
	}`, string(d.Body))
	require.Equal(t, dom.TypeID, d.Headers["__TypeId__"])
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, "m-receipt", d.MessageId)

	// Invalid records are refused before anything is sent.
	err = b.pub.Publish(context.Background(), topology.PaymentReceiptDispatch{OutTradeNo: "EI2"}, messaging.Options{})
	require.ErrorContains(t, err, "email")
}

// The contract gives the replication queue priorities 0–10 (x-max-priority
// 10, doc/contract.md):
// a Spring message of priority 10 keeps 10 through a retry.
func TestSpringPriorityTenSurvivesRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainObjectReplication)
	require.Equal(t, topology.MaxPriority, dom.MaxPriority)
	calls := newCounter()
	b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, jsonHandler(calls, func(n int) error {
		if n == 1 {
			return errors.New("object store down")
		}
		return nil
	}))...)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Priority: 10, MessageId: "m-prio",
		Headers: amqp.Table{"__TypeId__": dom.TypeID},
		Body:    []byte(`{"taskId":7}`),
	}))
	require.Eventually(t, func() bool { return calls.get("m-prio") == 2 }, 10*time.Second, poll, "not retried")
	calls.mu.Lock()
	d := calls.last["m-prio"]
	calls.mu.Unlock()
	require.Equal(t, 1, d.Retry, "the second call is the retry copy")
	require.EqualValues(t, 10, d.Priority, "the retry copy keeps priority 10")
}
