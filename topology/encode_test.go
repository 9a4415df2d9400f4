package topology_test

import (
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// What Isle publishes, as a Spring consumer's Jackson converter reads it:
// the Spring backend's names, ISO times, null for an empty String or a nil Long/Integer.

func TestEncodePaymentReceipt(t *testing.T) {
	t.Parallel()
	body, err := topology.Encode(topology.PaymentReceiptDispatch{
		TraceID:       "t-1",
		Email:         "buyer@example.cn",
		OutTradeNo:    "EI20251129200102001",
		Channel:       "WECHAT",
		TransactionID: "4200002345",
		AmountFen:     ptr[int32](2990),
		Currency:      "CNY",
		ProductCode:   "pro-month",
		PaidAt:        topology.LocalDateTime{Time: time.Date(2026, 11, 29, 12, 1, 2, 0, time.UTC)},
		ExpireAt:      topology.LocalDateTime{Time: time.Date(2026, 11, 29, 20, 31, 2, 5e8, topology.UTC8)},
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"traceId":"t-1","email":"buyer@example.cn","outTradeNo":"EI20251129200102001",
		"channel":"WECHAT","transactionId":"4200002345","amountFen":2990,"currency":"CNY","productCode":"pro-month",
		"paidAt":"2026-11-29T20:01:02","expireAt":"2026-11-29T20:31:02.5","lastError":null}`, string(body))

	body, err = topology.Encode(&topology.PaymentReceiptDispatch{Email: "a@b.cn", OutTradeNo: "EI1"})
	require.NoError(t, err)
	require.JSONEq(t, `{"traceId":null,"email":"a@b.cn","outTradeNo":"EI1","channel":null,"transactionId":null,
		"amountFen":null,"currency":null,"productCode":null,"paidAt":null,"expireAt":null,"lastError":null}`, string(body))
}

func TestEncodePaymentNotify(t *testing.T) {
	t.Parallel()
	m := topology.PaymentNotify{
		NotifyID:    "n-1",
		Channel:     "ALIPAY",
		OutTradeNo:  "EI1",
		TradeState:  "SUCCESS",
		SuccessTime: topology.OffsetDateTime{Time: time.Date(2025, 11, 29, 20, 1, 2, 5e8, topology.UTC8)},
		VerifyOK:    true,
		RawBody:     "a=1&b=<2>",
		LastError:   "order locked",
	}
	body, err := topology.Encode(m)
	require.NoError(t, err)
	require.JSONEq(t, `{"notifyId":"n-1","channel":"ALIPAY","outTradeNo":"EI1","transactionId":null,
		"tradeState":"SUCCESS","successTime":"2025-11-29T20:01:02.5+08:00","verifyOk":true,
		"rawBody":"a=1&b=<2>","lastError":"order locked","amountFen":null,"currency":null}`, string(body))
	require.Contains(t, string(body), `"a=1&b=<2>"`, "HTML is not escaped")

	// Isle's additions: the amount and currency paid.
	paid := m
	fen := int64(1500)
	paid.AmountFen, paid.Currency = &fen, "CNY"
	body, err = topology.Encode(paid)
	require.NoError(t, err)
	require.Contains(t, string(body), `"lastError":"order locked","amountFen":1500,"currency":"CNY"}`)
	back, err := topology.Decode[topology.PaymentNotify](body)
	require.NoError(t, err)
	require.Equal(t, paid.AmountFen, back.AmountFen)
	require.Equal(t, "CNY", back.Currency)

	m.SuccessTime.Time = time.Date(2025, 11, 29, 12, 1, 2, 0, time.UTC)
	body, err = topology.Encode(m)
	require.NoError(t, err)
	require.Contains(t, string(body), `"successTime":"2025-11-29T12:01:02Z"`)
}

func TestEncodeAgentBillingDeduct(t *testing.T) {
	t.Parallel()
	body, err := topology.Encode(topology.AgentBillingDeduct{
		DeductionID: "req-1", Username: "alice", AmountFen: "12.34567890",
		ModelName: "deepseek-chat", InputTokens: 1200, OutputTokens: 350, PendingRef: "9f86d081884c7d65",
	})
	require.NoError(t, err)
	want := `{"deductionId":"req-1","username":"alice","amountFen":"12.34567890","modelName":"deepseek-chat",` +
		`"inputTokens":1200,"outputTokens":350,"lastError":null,"pendingRef":"9f86d081884c7d65","requestHash":null}`
	require.JSONEq(t, want, string(body))
	require.Equal(t, want, string(body), "fields in the Spring backend's order")
}

func TestEncodeOtherRecords(t *testing.T) {
	t.Parallel()
	for m, want := range map[topology.Message]string{
		topology.EmailCodeDispatch{Email: "a@b.cn", Scene: "LOGIN", Code: "012345", CreatedAtEpochSeconds: 1764417662}: `{"traceId":null,
			"email":"a@b.cn","scene":"LOGIN","code":"012345","createdAtEpochSeconds":1764417662,"lastError":null}`,
		topology.AgentUsageStats{ModelName: "m", InputTokens: 1, CachedTokens: 2, OutputTokens: 3, ReasoningTokens: 4, CostMicroFen: 5}: `{
			"requestId":null,"modelName":"m","inputTokens":1,"cachedTokens":2,"outputTokens":3,"reasoningTokens":4,"costMicroFen":5}`,
		topology.ObjectReplication{TaskID: ptr[int64](7)}: `{"taskId":7,"traceId":null,"lastError":null}`,
		topology.IdentityMaterial{Username: "u", CertifyID: "c", MaterialInfo: `{"k":"v"}`}: `{"username":"u","certifyId":"c",
			"materialInfo":"{\"k\":\"v\"}","lastError":null}`,
		topology.ScoreUpsert{SubmitID: "s", UserID: ptr[int64](42), GameID: "snake", Score: 9, AchievedAt: 1}: `{"submitId":"s",
			"userId":42,"gameId":"snake","score":9,"durationMs":0,"moves":0,"achievedAt":1,"clientVersion":null,"traceId":null,"lastError":null}`,
	} {
		body, err := topology.Encode(m)
		require.NoError(t, err, m.Record())
		require.JSONEq(t, want, string(body), m.Record())
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	t.Parallel()
	_, err := topology.Encode(topology.ObjectReplication{})
	var fe *topology.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "taskId", fe.Field)
	require.ErrorContains(t, err, "topology: encode ObjectReplicationMessage: field taskId")

	_, err = topology.Encode((*topology.ObjectReplication)(nil))
	require.Error(t, err)
	_, err = topology.Encode(nil)
	require.Error(t, err)

	_, err = topology.Encode(topology.PaymentNotify{Channel: "ALIPAY", OutTradeNo: "1", TradeState: "S",
		SuccessTime: topology.OffsetDateTime{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}})
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "successTime", fe.Field)
}
