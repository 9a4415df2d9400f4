package store_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// moneyProbe runs lib/money.lua's functions on ARGV[1] and ARGV[2].
const moneyProbe = `
local aw, af = parse(ARGV[1])
local bw, bf = parse(ARGV[2])
if aw == nil then return 'nil' end
if bw == nil then return fmt(aw, af) .. '|nil' end
local tw, tf, uw, uf = take(aw, af, bw, bf)
return table.concat({fmt(aw, af), fmt(add(aw, af, bw, bf)), fmt(tw, tf), fmt(uw, uf),
  tostring(less(aw, af, bw, bf))}, '|')
`

// decimalForm is the form parse accepts: up to 15 whole digits, up to 8 places.
var decimalForm = regexp.MustCompile(`^(\d+)\.?(\d*)$`)

// The library's arithmetic is exact decimal arithmetic, at every carry and
// borrow and up to 15 whole digits, and parse refuses what is not an amount.
func TestMoneyLibraryIsExact(t *testing.T) {
	t.Parallel()
	lib, err := os.ReadFile("lua/lib/money.lua")
	require.NoError(t, err)
	rdb := storetest.Redis(t).Client(keys.DBAgentBilling)
	amount := rapid.OneOf(
		rapid.StringMatching(`[0-9]{1,15}(\.[0-9]{0,8})?`),
		rapid.StringMatching(`(0|1|99|999999999999999)\.(0|5|99999999|00000001)`),
		rapid.StringMatching(`[0-9.e -]{0,18}`),
	)
	rapid.Check(t, func(rt *rapid.T) {
		a, b := amount.Draw(rt, "a"), amount.Draw(rt, "b")
		got, err := rdb.Eval(context.Background(), string(lib)+moneyProbe, nil, a, b).Text()
		require.NoError(rt, err)
		da, aok := amountOf(a)
		db, bok := amountOf(b)
		var want string
		switch {
		case !aok:
			want = "nil"
		case !bok:
			want = da.StringFixed(8) + "|nil"
		default:
			want = strings.Join([]string{
				da.StringFixed(8),
				da.Add(db).StringFixed(8),
				decimal.Max(da.Sub(db), decimal.Zero).StringFixed(8),
				decimal.Max(db.Sub(da), decimal.Zero).StringFixed(8),
				map[bool]string{true: "true", false: "false"}[da.LessThan(db)],
			}, "|")
		}
		require.Equal(rt, want, got, "a=%q b=%q", a, b)
	})
}

func amountOf(s string) (decimal.Decimal, bool) {
	m := decimalForm.FindStringSubmatch(s)
	if m == nil || len(m[1]) > 15 || len(m[2]) > 8 {
		return decimal.Decimal{}, false
	}
	return decimal.RequireFromString(m[1] + "." + m[2] + "0"), true
}
