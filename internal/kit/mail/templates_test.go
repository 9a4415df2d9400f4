package mail_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/topology"
)

// The scenes with templates are exactly those the contract accepts.
func TestMailScenesMatchTheContract(t *testing.T) {
	t.Parallel()
	scenes := isle.Scenes()
	require.Equal(t, []string{"CHANGE_EMAIL", "LOGIN", "REGISTER", "RESET_PASSWORD", "UNREGISTER"}, scenes)
	msg := topology.EmailCodeDispatch{Email: "a@b.co", Code: "123456", CreatedAtEpochSeconds: 1}
	for _, s := range scenes {
		msg.Scene = s
		require.NoError(t, msg.Validate(), s)
	}
	msg.Scene = "DELETE_ACCOUNT"
	require.Error(t, msg.Validate())
	_, err := isle.RenderCode(isle.Code{Scene: "DELETE_ACCOUNT", Code: "123456", TTL: time.Minute})
	require.ErrorIs(t, err, isle.ErrUnknownScene)
	_, err = isle.RenderCode(isle.Code{Scene: "register", Code: "123456", TTL: time.Minute})
	require.ErrorIs(t, err, isle.ErrUnknownScene, "scenes are upper case, as on the wire")
}

func TestMailRenderCodeEveryScene(t *testing.T) {
	t.Parallel()
	evil := `<script>alert("x")</script>@evil.example`
	subjects := map[string]bool{}
	for _, lang := range []string{isle.LangZH, isle.LangEN} {
		for _, scene := range isle.Scenes() {
			c, err := isle.RenderCode(isle.Code{Scene: scene, Code: "042917", Email: evil, TTL: 5 * time.Minute, Lang: lang})
			require.NoError(t, err, "%s %s", lang, scene)
			require.Contains(t, c.Subject, "042917")
			require.NotContains(t, c.Subject, "\n")
			require.False(t, subjects[c.Subject], "two scenes share the subject %q", c.Subject)
			subjects[c.Subject] = true

			require.Contains(t, c.Text, "042917")
			require.Contains(t, c.Text, "5")
			require.Contains(t, c.Text, evil, "the text part is not HTML: the address reads as given")

			require.Contains(t, c.HTML, `<html lang="`+lang+`">`)
			require.Contains(t, c.HTML, ">042917<")
			require.NotContains(t, c.HTML, "<script>")
			require.Contains(t, c.HTML, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;@evil.example")

			// The rendered mail is sendable as it is.
			m := c.Message("user@example.org", "code-1")
			require.Equal(t, c.Subject, m.Subject)
			require.Equal(t, c.HTML, m.HTML)
		}
	}
}

func TestMailRenderCodeLanguageAndTTL(t *testing.T) {
	t.Parallel()
	zh, err := isle.RenderCode(isle.Code{Scene: "LOGIN", Code: "123456", TTL: 5 * time.Minute})
	require.NoError(t, err)
	require.Contains(t, zh.Text, "5 分钟", "the default language is zh-CN")
	en, err := isle.RenderCode(isle.Code{Scene: "LOGIN", Code: "123456", TTL: 90 * time.Second, Lang: "en-GB"})
	require.NoError(t, err)
	require.Contains(t, en.Text, "valid for 1 minute and", "whole minutes, rounded down, singular")
	fr, err := isle.RenderCode(isle.Code{Scene: "LOGIN", Code: "123456", TTL: 5 * time.Minute, Lang: "fr"})
	require.NoError(t, err)
	require.Equal(t, zh, fr, "an unknown language falls back to the default")

	for _, c := range []isle.Code{
		{Scene: "LOGIN", Code: "12345", TTL: time.Minute},
		{Scene: "LOGIN", Code: "12345a", TTL: time.Minute},
		{Scene: "LOGIN", Code: "123456", TTL: 0},
	} {
		_, err := isle.RenderCode(c)
		require.Error(t, err, "%+v", c)
	}
}

func TestMailRenderReceipt(t *testing.T) {
	t.Parallel()
	paid := time.Date(2026, 11, 29, 12, 1, 2, 0, time.UTC)
	r := isle.Receipt{
		Email:         "buyer@example.org",
		OutTradeNo:    "P202611290001",
		ProductCode:   "pro-month",
		AmountFen:     1990,
		Currency:      "CNY",
		Channel:       "ALIPAY",
		TransactionID: "2026112922001400001",
		PaidAt:        paid,
		ExpireAt:      paid.AddDate(0, 0, 30),
		Lang:          isle.LangEN,
	}
	c, err := isle.RenderReceipt(r)
	require.NoError(t, err)
	require.Equal(t, "Isle receipt for order P202611290001", c.Subject)
	for _, want := range []string{"P202611290001", "Isle Pro, one month", "¥19.90", "Alipay", "2026112922001400001",
		"2026-11-29 20:01:02 (UTC+8)", "2026-12-29 20:01:02 (UTC+8)", "buyer@example.org"} {
		require.Contains(t, c.Text, want)
	}
	require.Contains(t, c.HTML, "¥19.90")
	require.Contains(t, c.HTML, "2026-11-29 20:01:02 (UTC&#43;8)")

	zh, err := isle.RenderReceipt(isle.Receipt{OutTradeNo: "P2", ProductCode: "agent-recharge", AmountFen: 10000, Channel: "WECHAT"})
	require.NoError(t, err)
	require.Contains(t, zh.Text, "Agent 额度充值")
	require.Contains(t, zh.Text, "¥100.00")
	require.Contains(t, zh.Text, "微信支付")
	require.NotContains(t, zh.Text, "交易号", "an empty transaction id is not shown")
	require.NotContains(t, zh.Text, "有效期至", "no expiry, no line")

	// A null amount (the contract's Integer) is left out, not shown as 0.
	noAmount, err := isle.RenderReceipt(isle.Receipt{OutTradeNo: "P3", ProductCode: "pro-month", Lang: "en"})
	require.NoError(t, err)
	require.NotContains(t, noAmount.Text, "Amount")
	require.NotContains(t, noAmount.Text, "¥")

	// Everything that came from outside is escaped in the HTML part.
	evil, err := isle.RenderReceipt(isle.Receipt{
		OutTradeNo: "<b>1</b>", ProductCode: "<script>x()</script>", Channel: "<i>", TransactionID: `"><img src=x>`,
		Email: "<script>@x.y", AmountFen: 1, Currency: "<u>", Lang: "en",
	})
	require.NoError(t, err)
	require.NotContains(t, evil.HTML, "<script>")
	require.NotContains(t, evil.HTML, "<b>1")
	require.NotContains(t, evil.HTML, "<i>")
	require.NotContains(t, evil.HTML, "<img")
	require.NotContains(t, evil.HTML, "<u>")
	require.Contains(t, evil.HTML, "&lt;script&gt;x()&lt;/script&gt;")
	require.Contains(t, evil.Text, "<script>x()</script>")

	_, err = isle.RenderReceipt(isle.Receipt{ProductCode: "pro-month"})
	require.Error(t, err, "no order number")
	_, err = isle.RenderReceipt(isle.Receipt{OutTradeNo: "P4", AmountFen: -1})
	require.Error(t, err)
}

func TestMailFormatFen(t *testing.T) {
	t.Parallel()
	for fen, want := range map[int64]string{
		0: "¥0.00", 1: "¥0.01", 99: "¥0.99", 100: "¥1.00", 1990: "¥19.90", 123456789: "¥1234567.89", -5: "¥-0.05",
		-9223372036854775808: "¥-92233720368547758.08",
	} {
		require.Equal(t, want, isle.FormatFen(fen, "CNY"), fen)
	}
	require.Equal(t, "¥19.90", isle.FormatFen(1990, ""))
	require.Equal(t, "19.90 USD", isle.FormatFen(1990, "USD"))
}
