package paynotify_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/paynotify"
)

func TestPayParseYuan(t *testing.T) {
	t.Parallel()
	for s, fen := range map[string]int64{
		"0.01": 1, "0.1": 10, "0.10": 10, "15.00": 1500, "15": 1500, "88.88": 8888,
		"100000000.00": 10_000_000_000, "999999999999999.99": 99_999_999_999_999_999,
	} {
		got, err := paynotify.ParseYuan(s)
		require.NoError(t, err, s)
		require.Equal(t, fen, got, s)
	}
	for _, s := range []string{"", ".", ".5", "1.", "1.234", "-1.00", "+1.00", "1e3", " 1.00", "1.00 ", "1,00", "1.0a", "١.٠٠", "1000000000000000.00"} {
		_, err := paynotify.ParseYuan(s)
		require.Error(t, err, "%q", s)
	}
}

func TestPayFormatYuan(t *testing.T) {
	t.Parallel()
	for fen, s := range map[int64]string{0: "0.00", 1: "0.01", 10: "0.10", 1500: "15.00", 8888: "88.88", -5: "-0.05", math.MinInt64: "-92233720368547758.08"} {
		require.Equal(t, s, paynotify.FormatYuan(fen))
	}
}

func FuzzPayYuanRoundTrip(f *testing.F) {
	for _, s := range []string{"0.01", "15", "15.5", "88.88", "1.234", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fen, err := paynotify.ParseYuan(s)
		if err != nil {
			return
		}
		back, err := paynotify.ParseYuan(paynotify.FormatYuan(fen))
		require.NoError(t, err)
		require.Equal(t, fen, back)
	})
}

func TestPayAmountMatches(t *testing.T) {
	t.Parallel()
	n := paynotify.Notice{AmountFen: 1500, Currency: paynotify.CurrencyCNY}
	require.True(t, paynotify.AmountMatches(n, 1500))
	require.False(t, paynotify.AmountMatches(n, 1499))
	require.False(t, paynotify.AmountMatches(n, 1501))
	require.False(t, paynotify.AmountMatches(n, 150000), "fen, not yuan")

	usd := n
	usd.Currency = "USD"
	require.False(t, paynotify.AmountMatches(usd, 1500))

	zero := paynotify.Notice{Currency: paynotify.CurrencyCNY}
	require.False(t, paynotify.AmountMatches(zero, 0), "a zero order matches nothing")
}
