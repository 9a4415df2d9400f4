package handlers_test

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/topology"
)

// firstDeliveries are the good messages the fixture applies once: the
// replays in the table send them again.
func (f *consumerFixture) firstDeliveries() []badMessage {
	return []badMessage{
		{domain: topology.DomainAgentBilling, id: "spring-1", body: f.springDeduction()},
		{domain: topology.DomainAgentBilling, id: "-", isle: "00000000000000a1", body: springNoID},
		{domain: topology.DomainAgentUsageStats, body: usageR1},
		{domain: topology.DomainAgentUsageStats, id: "-", isle: "00000000000000b1", body: usageNoID},
		{domain: topology.DomainObjectReplication, body: taskID(f.taskDone)},
		{domain: topology.DomainIdentityMaterial, body: materialC1},
		{domain: topology.DomainPaymentNotify, body: f.paidNotice()},
		{domain: topology.DomainPaymentReceipt, body: f.receipt()},
		{domain: topology.DomainMiniGameScore, body: f.score("s-1", 1024)},
	}
}

// madeUpWechatCallback is a WeChat Pay notification body (a JSON string)
// whose resource no API v3 key sealed.
const madeUpWechatCallback = `"{\"id\":\"EV-1\",\"resource\":{\"algorithm\":\"AEAD_AES_256_GCM\",` +
	`\"ciphertext\":\"AAAAAAAAAAAAAAAAAAAAAA==\",\"associated_data\":\"transaction\",\"nonce\":\"0123456789ab\"}}"`

const (
	usageR1    = `{"requestId":"ann:r1","modelName":"m","inputTokens":3,"costMicroFen":300000000}`
	springNoID = `{"username":"ann","amountFen":"2.5","modelName":"m","inputTokens":7,"outputTokens":2}`
	usageNoID  = `{"modelName":"m","inputTokens":7,"outputTokens":2,"costMicroFen":250000000}`
	materialC1 = `{"username":"ivy","certifyId":"c-1","materialInfo":"{\"enc\":1}"}`
)

// springDeduction is a deduction as the Spring producers send it: no
// deduction id (the consumer keys it by the message id).
func (f *consumerFixture) springDeduction() string {
	return `{"username":"ann","amountFen":"1.5","modelName":"m","inputTokens":3,"outputTokens":1}`
}

func (f *consumerFixture) paidNotice() string {
	return `{"notifyId":"n-1","channel":"ALIPAY","outTradeNo":"` + f.paid.OutTradeNo + `","transactionId":"2026120122001",` +
		`"tradeState":"SUCCESS","successTime":"2026-12-01T10:00:00+08:00","verifyOk":true,"amountFen":2500,"currency":"CNY"}`
}

// notice is a verified notification of the pending WeChat order, with
// fields (JSON members) added or overriding.
func (f *consumerFixture) notice(fields string) string {
	return `{"notifyId":"n-2","channel":"WECHAT","outTradeNo":"` + f.pending.OutTradeNo + `","transactionId":"4200000001",` +
		`"tradeState":"SUCCESS","successTime":"2026-12-01T10:00:00+08:00","verifyOk":true,"amountFen":3000,"currency":"CNY"` + fields + `}`
}

func (f *consumerFixture) receipt() string {
	return `{"email":"ann@example.com","outTradeNo":"` + f.paid.OutTradeNo + `","channel":"ALIPAY","transactionId":"2026120122001","amountFen":2500}`
}

func (f *consumerFixture) score(submitID string, score int64) string {
	return fmt.Sprintf(`{"submitId":%q,"userId":%d,"gameId":"2048","score":%d,"durationMs":60000,"moves":100,"achievedAt":%d,"clientVersion":"1.4.0"}`,
		submitID, f.userID, score, time.Now().UnixMilli())
}

// scoreWith is a score of ann's with fields (JSON members) overriding.
func (f *consumerFixture) scoreWith(fields string) string {
	return `{"submitId":"s-2","userId":` + strconv.FormatInt(f.userID, 10) + `,"gameId":"2048","score":2048,"durationMs":60000,"moves":100` + fields + `}`
}

// badMessages is the table, consumer by consumer in the order of
// handlers.Consumers.
func (f *consumerFixture) badMessages() []badMessage {
	var all []badMessage
	add := func(domain string, cases ...badMessage) {
		for _, c := range cases {
			c.domain = domain
			all = append(all, c)
		}
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	code := func(fields string) string {
		return `{"email":"ann@example.com","scene":"LOGIN","code":"123456","createdAtEpochSeconds":` + now + fields + `}`
	}

	add(topology.DomainAgentBilling,
		badMessage{name: "not JSON", body: `deduct ann 1.5`, want: dead},
		badMessage{name: "negative amount", body: `{"username":"ann","amountFen":"-1","modelName":"m"}`, want: dead},
		badMessage{name: "amount in exponent form", body: `{"username":"ann","amountFen":"1e3","modelName":"m"}`, want: dead},
		badMessage{name: "amount past DECIMAL(20,8)", body: `{"username":"ann","amountFen":"1000000000000","modelName":"m"}`, want: dead},
		badMessage{name: "amount with 9 places", body: `{"username":"ann","amountFen":"0.000000001","modelName":"m"}`, want: dead},
		badMessage{name: "tokens of the wrong type", body: `{"username":"ann","amountFen":"1","modelName":"m","inputTokens":"many"}`, want: dead},
		badMessage{name: "tokens past int32", body: `{"username":"ann","amountFen":"1","modelName":"m","outputTokens":2147483648}`, want: dead},
		badMessage{name: "missing username", body: `{"amountFen":"1","modelName":"m"}`, want: dead},
		badMessage{name: "65-byte username", body: `{"username":"` + strings.Repeat("a", 65) + `","amountFen":"1","modelName":"m"}`, want: dead},
		badMessage{name: "pendingRef not a ref", body: `{"deductionId":"d1","username":"ann","amountFen":"1","modelName":"m","pendingRef":"a;b"}`, want: dead},
		badMessage{name: "unknown user", body: `{"deductionId":"d1","username":"ghost","amountFen":"1","modelName":"m"}`, want: dead},
		// The keys derived for messages without a deduction id are no deduction id's.
		badMessage{name: "deductionId naming a foreign message's key", body: `{"deductionId":"msg:spring-1","username":"ann","amountFen":"1.5","modelName":"m"}`, want: dead},
		badMessage{name: "deductionId in the hashed keys' namespace", body: `{"deductionId":"sha256:x","username":"ann","amountFen":"1","modelName":"m"}`, want: dead},
		badMessage{name: "replayed deduction", id: "spring-1", body: f.springDeduction(), want: noop},
		// A message without an id that the broker delivers again, after its
		// first delivery was applied, under the id the flow gives this delivery.
		badMessage{name: "redelivered deduction without an id", id: "-", isle: "00000000000000a2", redelivered: true, body: springNoID, want: noop},
	)
	add(topology.DomainAgentUsageStats,
		badMessage{name: "JSON array", body: `[` + usageR1 + `]`, want: dead},
		badMessage{name: "negative cost", body: `{"requestId":"ann:r2","modelName":"m","costMicroFen":-1}`, want: dead},
		badMessage{name: "missing model", body: `{"requestId":"ann:r2","inputTokens":3}`, want: dead},
		badMessage{name: "tokens past int32", body: `{"requestId":"ann:r2","modelName":"m","cachedTokens":4294967296}`, want: dead},
		badMessage{name: "256-byte requestId", body: `{"requestId":"` + strings.Repeat("r", 256) + `","modelName":"m"}`, want: dead},
		badMessage{name: "replayed usage", body: usageR1, want: noop},
		badMessage{name: "redelivered usage without an id", id: "-", isle: "00000000000000b2", redelivered: true, body: usageNoID, want: noop},
	)
	add(topology.DomainObjectReplication,
		badMessage{name: "taskId null", body: `{"taskId":null}`, want: dead},
		badMessage{name: "taskId 0", body: `{"taskId":0}`, want: dead},
		badMessage{name: "taskId not a number", body: `{"taskId":"abc"}`, want: dead},
		badMessage{name: "taskId fractional", body: `{"taskId":1.5}`, want: dead},
		badMessage{name: "unknown task", body: taskID(987654), want: dead},
		badMessage{name: "source outside the configured stores", body: taskID(f.foreign), want: dead},
		badMessage{name: "source in the replica store", body: taskID(f.inTarget), want: dead},
		badMessage{name: "replayed task", body: taskID(f.taskDone), want: noop},
	)
	add(topology.DomainIdentityMaterial,
		badMessage{name: "missing material", body: `{"username":"ivy","certifyId":"c-1"}`, want: dead},
		badMessage{name: "certifyId an object", body: `{"username":"ivy","certifyId":{"id":"c-1"},"materialInfo":"x"}`, want: dead},
		badMessage{name: "unknown certification", body: `{"username":"ivy","certifyId":"c-404","materialInfo":"x"}`, want: dead},
		badMessage{name: "another user's certification", body: `{"username":"mallory","certifyId":"c-1","materialInfo":"{\"enc\":2}"}`, want: dead},
		badMessage{name: "replayed material", body: materialC1, want: noop},
	)
	add(topology.DomainEmail,
		badMessage{name: "not UTF-8", body: "{\"email\":\"ann@example.com\xff\",\"scene\":\"LOGIN\",\"code\":\"123456\",\"createdAtEpochSeconds\":" + now + "}", want: dead},
		badMessage{name: "unknown scene", body: code(`,"scene":"ADMIN"`), want: dead},
		badMessage{name: "5-digit code", body: code(`,"code":"12345"`), want: dead},
		badMessage{name: "code with letters", body: code(`,"code":"12ab56"`), want: dead},
		badMessage{name: "header injection", body: code(`,"email":"ann@example.com\r\nBcc: all@example.com"`), want: dead},
		badMessage{name: "300-byte address", body: code(`,"email":"` + strings.Repeat("a", 288) + `@example.com"`), want: dead},
		badMessage{name: "address the mailer refuses", body: code(`,"email":"Ann <ann@example.com>"`), want: dead},
		badMessage{name: "no creation time", body: code(`,"createdAtEpochSeconds":0`), want: dead},
		badMessage{name: "fractional creation time", body: code(`,"createdAtEpochSeconds":1.5`), want: dead},
		// The contract: a code older than its TTL is dropped with a log line.
		badMessage{name: "expired code", body: code(`,"createdAtEpochSeconds":` + strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)), want: noop},
	)
	add(topology.DomainPaymentNotify,
		badMessage{name: "forged: verifyOk false", body: f.notice(`,"verifyOk":false`), want: dead},
		badMessage{name: "forged: verifyOk missing", body: `{"channel":"WECHAT","outTradeNo":"` + f.pending.OutTradeNo + `","transactionId":"4200000001","tradeState":"SUCCESS"}`, want: dead},
		badMessage{name: "verifyOk not a boolean", body: f.notice(`,"verifyOk":"yes"`), want: dead},
		badMessage{name: "unknown channel", body: f.notice(`,"channel":"PAYPAL"`), want: dead},
		badMessage{name: "unknown order", body: f.notice(`,"outTradeNo":"20260101000000deadbeefdeadbeefdead"`), want: dead},
		badMessage{name: "another channel's order", body: f.notice(`,"channel":"ALIPAY"`), want: dead},
		badMessage{name: "missing order number", body: f.notice(`,"outTradeNo":null`), want: dead},
		badMessage{name: "bad success time", body: f.notice(`,"successTime":"yesterday"`), want: dead},
		badMessage{name: "65-byte transaction id", body: f.notice(`,"transactionId":"` + strings.Repeat("9", 65) + `"`), want: dead},
		badMessage{name: "129-byte notify id", body: f.notice(`,"notifyId":"` + strings.Repeat("n", 129) + `"`), want: dead},
		// The broker is not trusted with the amount: a SUCCESS pays what the order asks, in its currency, or nothing.
		badMessage{name: "paid one fen", body: f.notice(`,"amountFen":1`), want: dead},
		badMessage{name: "paid in dollars", body: f.notice(`,"currency":"USD"`), want: dead},
		badMessage{name: "no amount (Spring's message)", body: f.notice(`,"amountFen":null,"currency":null`), want: dead},
		// Without the amount only the gateway's callback in rawBody, verified with the gateways' keys, can say what was paid.
		badMessage{name: "no amount, a made-up callback", body: f.notice(`,"amountFen":null,"currency":null,"rawBody":` + madeUpWechatCallback), want: dead},
		badMessage{name: "no amount, rawBody not a callback", body: f.notice(`,"amountFen":null,"currency":null,"rawBody":"success"`), want: dead},
		badMessage{name: "amount not a number", body: f.notice(`,"amountFen":"lots"`), want: dead},
		badMessage{name: "negative amount", body: f.notice(`,"amountFen":-3000`), want: dead},
		// The contract: states of a trade in progress are ignored, not recorded.
		badMessage{name: "NOTPAY", body: f.notice(`,"tradeState":"NOTPAY"`), want: noop},
		badMessage{name: "unknown trade state", body: f.notice(`,"tradeState":"FROZEN"`), want: noop},
		badMessage{name: "replayed payment", body: f.paidNotice(), want: noop},
	)
	add(topology.DomainPaymentReceipt,
		badMessage{name: "unknown order", body: `{"email":"ann@example.com","outTradeNo":"20260101000000deadbeefdeadbeefdead"}`, want: dead},
		badMessage{name: "order never paid", body: `{"email":"wendy@example.com","outTradeNo":"` + f.pending.OutTradeNo + `"}`, want: dead},
		badMessage{name: "header injection", body: `{"email":"ann@example.com\nBcc: all@example.com","outTradeNo":"` + f.paid.OutTradeNo + `"}`, want: dead},
		badMessage{name: "negative amount", body: `{"email":"ann@example.com","outTradeNo":"` + f.paid.OutTradeNo + `","amountFen":-2500}`, want: dead},
		badMessage{name: "bad paidAt", body: `{"email":"ann@example.com","outTradeNo":"` + f.paid.OutTradeNo + `","paidAt":[2026,13,1]}`, want: dead},
		badMessage{name: "replayed receipt", body: f.receipt(), want: noop},
	)
	add(topology.DomainMiniGameScore,
		badMessage{name: "truncated JSON", body: `{"submitId":"s-2","userId":`, want: dead},
		badMessage{name: "unknown game", body: f.scoreWith(`,"gameId":"chess"`), want: dead},
		badMessage{name: "userId null", body: f.scoreWith(`,"userId":null`), want: dead},
		badMessage{name: "userId 0", body: f.scoreWith(`,"userId":0`), want: dead},
		badMessage{name: "negative score", body: f.scoreWith(`,"score":-1`), want: dead},
		badMessage{name: "fractional score", body: f.scoreWith(`,"score":1.5`), want: dead},
		badMessage{name: "score past int64", body: f.scoreWith(`,"score":9223372036854775808`), want: dead},
		badMessage{name: "more than a 2048 session can score", body: f.scoreWith(`,"score":64815001`), want: dead},
		badMessage{name: "score past a double's 53 bits", body: f.scoreWith(`,"score":9007199254740993`), want: dead},
		badMessage{name: "65-byte submitId", body: f.scoreWith(`,"submitId":"` + strings.Repeat("s", 65) + `"`), want: dead},
		badMessage{name: "65-byte clientVersion", body: f.scoreWith(`,"clientVersion":"` + strings.Repeat("v", 65) + `"`), want: dead},
		badMessage{name: "replayed score", body: f.score("s-1", 1024), want: noop},
	)
	return all
}
