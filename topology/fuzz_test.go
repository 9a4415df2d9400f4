package topology_test

import (
	"testing"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Every decoder is fuzzed for two properties: it never panics and fails only
// with a *DecodeError; and what it accepts survives Encode and Decode
// unchanged (and re-encodes to the same bytes).

// malformedSeeds are shared by every target.
var malformedSeeds = []string{
	``, `null`, `[]`, `{}`, `0`, `"x"`, `{"a":1}{}`, `{"a":`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`,
	`{"x":{"y":[1,2,{"z":null}]},"X":true}`, `{"lastError":"\u0000\ud800"}`, `{"lastError":1e999999999}`,
}

func fuzzDecode[T any, PT interface {
	*T
	topology.Message
}](f *testing.F, seeds ...string) {
	f.Helper()

	for _, s := range append(seeds, malformedSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := topology.Decode[T, PT](body)
		if err != nil {
			var de *topology.DecodeError
			require.ErrorAs(t, err, &de)
			require.True(t, de.Permanent())
			return
		}
		out, err := topology.Encode(PT(&v))
		require.NoError(t, err, "%+v", v)
		again, err := topology.Decode[T, PT](out)
		require.NoError(t, err, "%s", out)
		require.Equal(t, v, again, "%s", out)
		out2, err := topology.Encode(PT(&again))
		require.NoError(t, err)
		require.Equal(t, string(out), string(out2))
	})
}

func FuzzDecodeEmailCodeDispatch(f *testing.F) {
	fuzzDecode[topology.EmailCodeDispatch](f,
		`{"traceId":"t","email":"a@b.cn","scene":"REGISTER","code":"012345","createdAtEpochSeconds":1764417662,"lastError":null}`,
		`{"email":"a@b.cn","scene":"UNREGISTER","code":"999999","createdAtEpochSeconds":"1764417662"}`,
		`{"email":"a@b.cn\r\n","scene":"LOGIN","code":"12345","createdAtEpochSeconds":1.5}`,
		`{"email":"x@y.z","scene":"CHANGE_EMAIL","code":123456,"createdAtEpochSeconds":9223372036854775807}`,
	)
}

func FuzzDecodePaymentNotify(f *testing.F) {
	fuzzDecode[topology.PaymentNotify](f,
		`{"notifyId":"n","channel":"ALIPAY","outTradeNo":"EI1","transactionId":"2025","tradeState":"SUCCESS","successTime":1764417662.123456789,"verifyOk":true,"rawBody":"a=1&b=2","lastError":null}`,
		`{"channel":"WECHAT","outTradeNo":"EI1","tradeState":"REFUND","successTime":"2025-11-29T20:01:02.5+08:00","verifyOk":"false"}`,
		`{"channel":"WECHAT","outTradeNo":"EI1","tradeState":"CLOSED","successTime":"2025-11-29T20:01","verifyOk":1}`,
		`{"channel":"ALIPAY","outTradeNo":"EI1","tradeState":"S","successTime":"-1.5"}`,
		`{"channel":"ALIPAY","outTradeNo":"EI1","tradeState":"S","successTime":"0001-01-01T08:00:00+08:00"}`,
		`{"channel":"ALIPAY","outTradeNo":"EI1","tradeState":"S","successTime":"9999-12-31T23:59:59-18:00"}`,
	)
}

func FuzzDecodePaymentReceiptDispatch(f *testing.F) {
	fuzzDecode[topology.PaymentReceiptDispatch](f,
		`{"traceId":"t","email":"a@b.cn","outTradeNo":"EI1","channel":"WECHAT","transactionId":"42","amountFen":2990,"currency":"CNY","productCode":"pro-month","paidAt":[2026,11,29,20,1,2],"expireAt":[2026,11,29,20,31,2,500000000],"lastError":null}`,
		`{"email":"a@b.cn","outTradeNo":"EI1","amountFen":"2990","paidAt":"2026-11-29T20:01:02","expireAt":"2026-11-29T12:31:02.5Z"}`,
		`{"email":"a@b.cn","outTradeNo":"EI1","amountFen":null,"paidAt":[],"expireAt":[2024,2,29,23,59]}`,
		`{"email":"a@b.cn","outTradeNo":"EI1","amountFen":2.99e3,"paidAt":[1,1,1,8,0],"expireAt":[9999,12,31,23,59,59,999999999]}`,
		`{"email":"a@b.cn","outTradeNo":"EI1","paidAt":"9999-12-31T15:59:59.999999999Z","expireAt":"0001-01-01T00:00:01-23:59"}`,
	)
}

func FuzzDecodeAgentBillingDeduct(f *testing.F) {
	fuzzDecode[topology.AgentBillingDeduct](f,
		`{"username":"alice","amountFen":"12.34567890","modelName":"deepseek-chat","inputTokens":1200,"outputTokens":350,"lastError":null}`,
		`{"deductionId":"req-1","username":"alice","amountFen":0.5,"modelName":"mimo-v2-pro","inputTokens":"0","outputTokens":0}`,
		`{"username":"alice","amountFen":"999999999999.99999999","modelName":"m","inputTokens":2147483647,"outputTokens":-1}`,
		`{"username":"alice","amountFen":1e-8,"modelName":"m"}`,
	)
}

func FuzzDecodeAgentUsageStats(f *testing.F) {
	fuzzDecode[topology.AgentUsageStats](f,
		`{"modelName":"deepseek-chat","inputTokens":1200,"cachedTokens":800,"outputTokens":350,"reasoningTokens":0,"costMicroFen":123456789}`,
		`{"requestId":"r","modelName":"m","inputTokens":"5","costMicroFen":"9223372036854775807"}`,
		`{"modelName":"m","costMicroFen":9223372036854775808}`,
	)
}

func FuzzDecodeObjectReplication(f *testing.F) {
	fuzzDecode[topology.ObjectReplication](f,
		`{"taskId":1024,"traceId":"t","lastError":null}`,
		`{"taskId":"1024"}`,
		`{"taskId":null}`,
		`{"taskId":1.0e3,"traceId":12}`,
	)
}

func FuzzDecodeIdentityMaterial(f *testing.F) {
	fuzzDecode[topology.IdentityMaterial](f,
		`{"username":"alice","certifyId":"cid-1","materialInfo":"{\"faceImage\":\"base64...\"}","lastError":null}`,
		`{"username":1,"certifyId":true,"materialInfo":-0.0}`,
		`{"username":"a","certifyId":"c","materialInfo":{"not":"a string"}}`,
	)
}

func FuzzDecodeScoreUpsert(f *testing.F) {
	fuzzDecode[topology.ScoreUpsert](f,
		`{"submitId":"s-1","userId":42,"gameId":"2048","score":131072,"durationMs":600000,"moves":1234,"achievedAt":1764417662123,"clientVersion":"1.4.0","traceId":"t","lastError":null}`,
		`{"submitId":"s-1","userId":"42","gameId":2048,"score":"0","durationMs":" 5 ","moves":"null"}`,
		`{"submitId":"s-1","userId":0,"gameId":"snake","score":-1}`,
	)
}
