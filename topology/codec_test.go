package topology_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

func ptr[N any](v N) *N { return &v }

// Bodies as Spring AMQP's Jackson 2 converter publishes them (JavaTimeModule,
// dates as timestamps), plus the noise a producer may add: unknown fields,
// case variants of known names, duplicate keys, scalars of another type.

func TestDecodeSpringPaymentNotify(t *testing.T) {
	t.Parallel()
	body := `{"notifyId":"2025112922001400001","channel":"ALIPAY","outTradeNo":"EI20251129200102001",
		"transactionId":2025112922001499991,"tradeState":"SUCCESS","successTime":1764417662.123456789,
		"verifyOk":true,"rawBody":"gmt_payment=2025-11-29 20:01:02&notify_id=1&sign=a+b/c==","lastError":null,
		"gatewayVersion":"3","NotifyId":"shadow","OUTTRADENO":"shadow","extra":{"a":[1,{"b":null}]}}`
	m, err := topology.Decode[topology.PaymentNotify]([]byte(body))
	require.NoError(t, err)
	require.Equal(t, topology.PaymentNotify{
		NotifyID:      "2025112922001400001",
		Channel:       "ALIPAY",
		OutTradeNo:    "EI20251129200102001",
		TransactionID: "2025112922001499991", // a number in a String field keeps its literal text
		TradeState:    "SUCCESS",
		SuccessTime:   topology.OffsetDateTime{Time: time.Date(2025, 11, 29, 12, 1, 2, 123456789, time.UTC)},
		VerifyOK:      true,
		RawBody:       "gmt_payment=2025-11-29 20:01:02&notify_id=1&sign=a+b/c==",
	}, m)
}

func TestDecodeSpringPaymentReceipt(t *testing.T) {
	t.Parallel()
	body := `{"traceId":"7f3c2a","email":"buyer@example.cn","outTradeNo":"EI20251129200102001","channel":"WECHAT",
		"transactionId":4200002345202511291234567890,"amountFen":"2990","currency":"CNY","productCode":"pro-month",
		"paidAt":[2026,11,29,20,1,2],"expireAt":[2026,11,29,20,31,2,500000000],"lastError":null,
		"Email":"attacker@example.com","AMOUNTFEN":1,"traceId":"7f3c2b"}`
	m, err := topology.Decode[topology.PaymentReceiptDispatch]([]byte(body))
	require.NoError(t, err)
	require.Equal(t, topology.PaymentReceiptDispatch{
		TraceID:       "7f3c2b", // duplicate key: the last wins
		Email:         "buyer@example.cn",
		OutTradeNo:    "EI20251129200102001",
		Channel:       "WECHAT",
		TransactionID: "4200002345202511291234567890",
		AmountFen:     ptr[int32](2990),
		Currency:      "CNY",
		ProductCode:   "pro-month",
		PaidAt:        topology.LocalDateTime{Time: time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8)},
		ExpireAt:      topology.LocalDateTime{Time: time.Date(2026, 11, 29, 20, 31, 2, 500000000, topology.UTC8)},
	}, m)
}

func TestDecodeSpringAgentBillingAndScore(t *testing.T) {
	t.Parallel()
	bill, err := topology.Decode[topology.AgentBillingDeduct]([]byte(`{"username":"alice","amountFen":12.34567890,
		"modelName":"deepseek-chat","inputTokens":"1200","outputTokens":350,"lastError":null,"Username":"bob"}`))
	require.NoError(t, err)
	require.Equal(t, topology.AgentBillingDeduct{
		Username: "alice", AmountFen: "12.34567890", ModelName: "deepseek-chat", InputTokens: 1200, OutputTokens: 350,
	}, bill)
	amount, err := bill.Amount()
	require.NoError(t, err)
	require.Equal(t, "12.3456789", amount.String())

	score, err := topology.Decode[topology.ScoreUpsert]([]byte(`{"submitId":"s-1","userId":"42","gameId":2048,
		"score":131072,"durationMs":600000.0,"moves":1234,"achievedAt":1764417662123,"clientVersion":"1.4.0",
		"traceId":true,"lastError":null}`))
	require.NoError(t, err)
	require.Equal(t, topology.ScoreUpsert{
		SubmitID: "s-1", UserID: ptr[int64](42), GameID: "2048", Score: 131072, DurationMs: 600000, Moves: 1234,
		AchievedAt: 1764417662123, ClientVersion: "1.4.0", TraceID: "true",
	}, score)
}

// Jackson 3 (Spring AMQP 4's JacksonJsonMessageConverter) writes ISO strings.
func TestDecodeSpringISOTimes(t *testing.T) {
	t.Parallel()
	n, err := topology.Decode[topology.PaymentNotify]([]byte(`{"channel":"WECHAT","outTradeNo":"EI1",
		"tradeState":"SUCCESS","successTime":"2025-11-29T20:01:02.5+08:00","verifyOk":"true"}`))
	require.NoError(t, err)
	require.Equal(t, time.Date(2025, 11, 29, 20, 1, 2, 5e8, topology.UTC8), n.SuccessTime.Time)
	require.True(t, n.VerifyOK)

	r, err := topology.Decode[topology.PaymentReceiptDispatch]([]byte(`{"email":"a@b.cn","outTradeNo":"EI1",
		"amountFen":null,"paidAt":"2026-11-29T20:01:02","expireAt":"2026-11-29T12:31:02.5Z"}`))
	require.NoError(t, err)
	require.Nil(t, r.AmountFen)
	require.Equal(t, time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8), r.PaidAt.Time)
	require.Equal(t, time.Date(2026, 11, 29, 20, 31, 2, 5e8, topology.UTC8), r.ExpireAt.Time)
}

func TestDecodeEmailCodeDispatch(t *testing.T) {
	t.Parallel()
	m, err := topology.Decode[topology.EmailCodeDispatch]([]byte(`{"traceId":"t-9","email":"a@b.cn",
		"scene":"RESET_PASSWORD","code":"012345","createdAtEpochSeconds":1764417662,"lastError":"smtp 451"}`))
	require.NoError(t, err)
	require.Equal(t, topology.EmailCodeDispatch{
		TraceID: "t-9", Email: "a@b.cn", Scene: "RESET_PASSWORD", Code: "012345",
		CreatedAtEpochSeconds: 1764417662, LastError: "smtp 451",
	}, m)
}

func TestDecodeErrorNamesTheField(t *testing.T) {
	t.Parallel()
	const ok = `"email":"a@b.cn","outTradeNo":"EI1"`
	for body, field := range map[string]string{
		`{` + ok + `,"amountFen":1.5}`:                  "amountFen", // Jackson would truncate
		`{` + ok + `,"amountFen":3000000000}`:           "amountFen",
		`{` + ok + `,"amountFen":"12abc"}`:              "amountFen",
		`{` + ok + `,"amountFen":true}`:                 "amountFen",
		`{` + ok + `,"amountFen":0}`:                    "amountFen", // Validate
		`{` + ok + `,"currency":{"code":"CNY"}}`:        "currency",
		`{` + ok + `,"productCode":["a"]}`:              "productCode",
		`{` + ok + `,"paidAt":[2026,2,29,0,0]}`:         "paidAt",
		`{` + ok + `,"expireAt":"tomorrow"}`:            "expireAt",
		`{"email":"a@b.cn","outTradeNo":" "}`:           "outTradeNo",
		`{"Email":"a@b.cn","outTradeNo":"EI1"}`:         "email", // a case variant fills nothing
		`{"email":"a@b.cn\r\nBcc: x","outTradeNo":"1"}`: "email",
	} {
		_, err := topology.Decode[topology.PaymentReceiptDispatch]([]byte(body))
		var de *topology.DecodeError
		require.ErrorAs(t, err, &de, body)
		require.Equal(t, "PaymentReceiptDispatchMessage", de.Record, body)
		require.Equal(t, field, de.Field, body)
		var fe *topology.FieldError
		require.ErrorAs(t, err, &fe, body)
		require.Equal(t, field, fe.Field, body)
		require.Contains(t, err.Error(), "field "+field, body)
	}
}

func TestDecodeMalformedBodies(t *testing.T) {
	t.Parallel()
	const valid = `{"channel":"ALIPAY","outTradeNo":"EI1","tradeState":"SUCCESS"}`
	_, err := topology.Decode[topology.PaymentNotify]([]byte(" \n" + valid + "\n "))
	require.NoError(t, err)
	for _, body := range []string{
		"", " ", "not json", "null", "42", `"ALIPAY"`, "true", "[]", "[" + valid + "]",
		valid + " {}", valid + "garbage", valid + ",", valid[:len(valid)-1], `{"channel":"ALI`,
		`{"channel":"ALIPAY",}`, `{'channel':'ALIPAY'}`, `{"rawBody":"` + "\xff\xfe" + `"}`,
	} {
		_, err := topology.Decode[topology.PaymentNotify]([]byte(body))
		var de *topology.DecodeError
		require.ErrorAs(t, err, &de, body)
		require.Empty(t, de.Field, body)
		require.True(t, de.Permanent(), body)
		var p interface{ Permanent() bool }
		require.True(t, errors.As(err, &p) && p.Permanent(), body)
	}
}

func TestDomainOf(t *testing.T) {
	t.Parallel()
	tp := seedTopology(t)
	seen := map[string]bool{}
	for _, m := range allMessages() {
		d, ok := tp.DomainOf(m)
		require.True(t, ok, m.Record())
		require.Equal(t, m.Record(), d.Message)
		require.Equal(t, d.Name, m.Domain(), "%s names the domain it travels on", m.Record())
		seen[d.Name] = true
	}
	require.Len(t, seen, len(tp.Domains()), "every domain has a record type")
	_, ok := tp.DomainOf((*topology.ScoreUpsert)(nil))
	require.False(t, ok)
	_, ok = tp.DomainOf(nil)
	require.False(t, ok)
}

// allMessages is every record, the last as a pointer (a pointer implements
// Message too).
func allMessages() []topology.Message {
	all := topology.Records()
	last := reflect.New(reflect.TypeOf(all[len(all)-1]))
	all[len(all)-1] = last.Interface().(topology.Message)
	return all
}
