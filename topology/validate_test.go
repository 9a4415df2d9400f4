package topology_test

import (
	"strings"
	"testing"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Valid records, edited by each case to break one field.
var (
	okEmail   = topology.EmailCodeDispatch{Email: "a@b.cn", Scene: "LOGIN", Code: "123456", CreatedAtEpochSeconds: 1}
	okNotify  = topology.PaymentNotify{Channel: "WECHAT", OutTradeNo: "EI1", TradeState: "SUCCESS"}
	okReceipt = topology.PaymentReceiptDispatch{Email: "a@b.cn", OutTradeNo: "EI1", AmountFen: ptr[int32](1)}
	okBilling = topology.AgentBillingDeduct{Username: "alice", AmountFen: "0.00000001", ModelName: "m"}
	okUsage   = topology.AgentUsageStats{ModelName: "m"}
	okObject  = topology.ObjectReplication{TaskID: ptr[int64](1)}
	okID      = topology.IdentityMaterial{Username: "u", CertifyID: "c", MaterialInfo: "{}"}
	okScore   = topology.ScoreUpsert{SubmitID: "s", UserID: ptr[int64](1), GameID: "2048"}
)

func edit[T topology.Message](m T, f func(*T)) topology.Message {
	f(&m)
	return m
}

func TestValidateAcceptsTheValidRecords(t *testing.T) {
	t.Parallel()
	for _, m := range []topology.Message{okEmail, okNotify, okReceipt, okBilling, okUsage, okObject, okID, okScore,
		edit(okReceipt, func(m *topology.PaymentReceiptDispatch) { m.AmountFen = nil }),
		edit(okBilling, func(m *topology.AgentBillingDeduct) { m.AmountFen = "999999999999.99999999" }),
		edit(okEmail, func(m *topology.EmailCodeDispatch) { m.Email = strings.Repeat("a", 249) + "@b.cn" }),
	} {
		require.NoError(t, m.Validate(), m.Record())
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	type (
		E  = topology.EmailCodeDispatch
		N  = topology.PaymentNotify
		R  = topology.PaymentReceiptDispatch
		B  = topology.AgentBillingDeduct
		U  = topology.AgentUsageStats
		O  = topology.ObjectReplication
		I  = topology.IdentityMaterial
		S  = topology.ScoreUpsert
		tc struct {
			field string
			m     topology.Message
		}
	)
	for _, c := range []tc{
		{"email", edit(okEmail, func(m *E) { m.Email = "" })},
		{"email", edit(okEmail, func(m *E) { m.Email = "  " })},
		{"email", edit(okEmail, func(m *E) { m.Email = strings.Repeat("a", 250) + "@b.cn" })},
		{"email", edit(okEmail, func(m *E) { m.Email = "a@b.cn\r\nBcc: c@d.cn" })},
		{"email", edit(okEmail, func(m *E) { m.Email = "a@b.cn\n" })},
		{"scene", edit(okEmail, func(m *E) { m.Scene = "" })},
		{"scene", edit(okEmail, func(m *E) { m.Scene = "login" })},
		{"code", edit(okEmail, func(m *E) { m.Code = "12345" })},
		{"code", edit(okEmail, func(m *E) { m.Code = "1234567" })},
		{"code", edit(okEmail, func(m *E) { m.Code = "12345a" })},
		{"code", edit(okEmail, func(m *E) { m.Code = "１２３４５６" })},
		{"createdAtEpochSeconds", edit(okEmail, func(m *E) { m.CreatedAtEpochSeconds = 0 })},
		{"createdAtEpochSeconds", edit(okEmail, func(m *E) { m.CreatedAtEpochSeconds = -1 })},
		{"channel", edit(okNotify, func(m *N) { m.Channel = "" })},
		{"channel", edit(okNotify, func(m *N) { m.Channel = "PAYPAL" })},
		{"outTradeNo", edit(okNotify, func(m *N) { m.OutTradeNo = "" })},
		{"tradeState", edit(okNotify, func(m *N) { m.TradeState = "" })},
		{"email", edit(okReceipt, func(m *R) { m.Email = "" })},
		{"email", edit(okReceipt, func(m *R) { m.Email = "a@b.cn\r" })},
		{"outTradeNo", edit(okReceipt, func(m *R) { m.OutTradeNo = "" })},
		{"amountFen", edit(okReceipt, func(m *R) { m.AmountFen = ptr[int32](0) })},
		{"amountFen", edit(okReceipt, func(m *R) { m.AmountFen = ptr[int32](-1) })},
		{"username", edit(okBilling, func(m *B) { m.Username = "" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "0" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "0.00000000" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "-1" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "1.123456789" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "1e3" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = " 1" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "1." })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "NaN" })},
		{"amountFen", edit(okBilling, func(m *B) { m.AmountFen = "1234567890123" })},
		{"modelName", edit(okBilling, func(m *B) { m.ModelName = "" })},
		{"pendingRef", edit(okBilling, func(m *B) { m.PendingRef = "ab|cd" })},
		{"requestHash", edit(okBilling, func(m *B) { m.RequestHash = "0123456789abcdef0123456789abcdef0" })},
		{"inputTokens", edit(okBilling, func(m *B) { m.InputTokens = -1 })},
		{"outputTokens", edit(okBilling, func(m *B) { m.OutputTokens = -1 })},
		{"modelName", edit(okUsage, func(m *U) { m.ModelName = "" })},
		{"inputTokens", edit(okUsage, func(m *U) { m.InputTokens = -1 })},
		{"cachedTokens", edit(okUsage, func(m *U) { m.CachedTokens = -1 })},
		{"outputTokens", edit(okUsage, func(m *U) { m.OutputTokens = -1 })},
		{"reasoningTokens", edit(okUsage, func(m *U) { m.ReasoningTokens = -1 })},
		{"costMicroFen", edit(okUsage, func(m *U) { m.CostMicroFen = -1 })},
		{"taskId", edit(okObject, func(m *O) { m.TaskID = nil })},
		{"taskId", edit(okObject, func(m *O) { m.TaskID = ptr[int64](0) })},
		{"taskId", edit(okObject, func(m *O) { m.TaskID = ptr[int64](-5) })},
		{"username", edit(okID, func(m *I) { m.Username = "" })},
		{"certifyId", edit(okID, func(m *I) { m.CertifyID = "" })},
		{"materialInfo", edit(okID, func(m *I) { m.MaterialInfo = "" })},
		{"submitId", edit(okScore, func(m *S) { m.SubmitID = "" })},
		{"userId", edit(okScore, func(m *S) { m.UserID = nil })},
		{"userId", edit(okScore, func(m *S) { m.UserID = ptr[int64](0) })},
		{"gameId", edit(okScore, func(m *S) { m.GameID = "" })},
		{"score", edit(okScore, func(m *S) { m.Score = -1 })},
		{"durationMs", edit(okScore, func(m *S) { m.DurationMs = -1 })},
		{"moves", edit(okScore, func(m *S) { m.Moves = -1 })},
	} {
		err := c.m.Validate()
		var fe *topology.FieldError
		require.ErrorAs(t, err, &fe, "%s %+v", c.m.Record(), c.m)
		require.Equal(t, c.field, fe.Field, "%s %+v", c.m.Record(), c.m)
	}
}

// A record a Spring producer sends without its required fields fails Decode.
func TestDecodeValidatesEveryRecord(t *testing.T) {
	t.Parallel()
	first := map[string]string{
		"EmailCodeDispatchMessage": "email", "PaymentNotifyMessage": "channel",
		"PaymentReceiptDispatchMessage": "email", "AgentBillingDeductMessage": "username",
		"AgentUsageStatsMessage": "modelName", "ObjectReplicationMessage": "taskId",
		"IdentityMaterialMessage": "username", "ScoreUpsertMessage": "submitId",
	}
	for _, m := range allMessages() {
		err := decodeAs(m, []byte(`{"lastError":"x"}`))
		var de *topology.DecodeError
		require.ErrorAs(t, err, &de, m.Record())
		require.Equal(t, m.Record(), de.Record)
		require.Equal(t, first[m.Record()], de.Field, m.Record())
	}
}

// decodeAs decodes body as the record type of m.
func decodeAs(m topology.Message, body []byte) error {
	var err error
	switch m.(type) {
	case topology.EmailCodeDispatch:
		_, err = topology.Decode[topology.EmailCodeDispatch](body)
	case topology.PaymentNotify:
		_, err = topology.Decode[topology.PaymentNotify](body)
	case topology.PaymentReceiptDispatch:
		_, err = topology.Decode[topology.PaymentReceiptDispatch](body)
	case topology.AgentBillingDeduct:
		_, err = topology.Decode[topology.AgentBillingDeduct](body)
	case topology.AgentUsageStats:
		_, err = topology.Decode[topology.AgentUsageStats](body)
	case topology.ObjectReplication:
		_, err = topology.Decode[topology.ObjectReplication](body)
	case topology.IdentityMaterial:
		_, err = topology.Decode[topology.IdentityMaterial](body)
	case *topology.ScoreUpsert:
		_, err = topology.Decode[topology.ScoreUpsert](body)
	}
	return err
}

// A string longer than the column that keeps it is refused by Decode, so a
// message that can never be stored goes to the DLQ at once instead of
// failing its retries on MySQL's "data too long" (or, in a non-strict
// sql_mode, being stored cut short).
func TestValidateRefusesWhatItsColumnCannotKeep(t *testing.T) {
	t.Parallel()
	type (
		N = topology.PaymentNotify
		S = topology.ScoreUpsert
	)
	for field, m := range map[string]topology.Message{
		"notifyId":      edit(okNotify, func(m *N) { m.NotifyID = strings.Repeat("n", 129) }),
		"outTradeNo":    edit(okNotify, func(m *N) { m.OutTradeNo = strings.Repeat("o", 65) }),
		"transactionId": edit(okNotify, func(m *N) { m.TransactionID = strings.Repeat("9", 65) }),
		"submitId":      edit(okScore, func(m *S) { m.SubmitID = strings.Repeat("s", 65) }),
		"gameId":        edit(okScore, func(m *S) { m.GameID = strings.Repeat("g", 33) }),
		"clientVersion": edit(okScore, func(m *S) { m.ClientVersion = strings.Repeat("v", 65) }),
	} {
		var fe *topology.FieldError
		require.ErrorAs(t, m.Validate(), &fe, field)
		require.Equal(t, field, fe.Field)
	}
	// The widths are the columns': characters, not bytes (utf8mb4).
	for _, m := range []topology.Message{
		edit(okNotify, func(m *N) {
			m.NotifyID, m.OutTradeNo, m.TransactionID = strings.Repeat("n", 128), strings.Repeat("o", 64), strings.Repeat("9", 64)
		}),
		edit(okScore, func(m *S) { m.SubmitID, m.ClientVersion = strings.Repeat("s", 64), strings.Repeat("版", 64) }),
	} {
		require.NoError(t, m.Validate(), "%+v", m)
	}
}
