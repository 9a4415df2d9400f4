package httpapi_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

func (b *testBundle) orderRows(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Model(&store.PaymentOrder{}).Count(&n).Error)
	return n
}

func TestOrderCreateAnswers201AndSetsTheKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ann := b.token(t, "ann", httpapi.RoleUser)
	status, _, body := b.do(t, http.MethodPost, "/v1/payments/orders", ann,
		`{"product":"pro-month","amountFen":1500,"channel":"WECHAT","receiptEmail":"ann@example.com"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	no := body["outTradeNo"].(string)
	require.Regexp(t, `^[0-9a-f]{34}$`, no)
	require.Equal(t, "PENDING", body["status"])
	require.Equal(t, "ann", body["username"])
	require.Equal(t, "pro-month", body["product"])
	require.Equal(t, "WECHAT", body["channel"])
	require.Equal(t, "CNY", body["currency"])
	require.Equal(t, "ann@example.com", body["receiptEmail"])
	require.EqualValues(t, 1500, body["amountFen"])
	require.Nil(t, body["paidAt"])
	expire, err := time.Parse(time.RFC3339Nano, body["expireAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(order.TTL), expire, 10*time.Second)

	c, k := b.redis.Client(keys.ActiveOrder.DB), b.redis.Keys()
	for key, want := range map[string]struct {
		v   string
		ttl time.Duration
	}{
		k.Key(keys.ActiveOrder, "ann"):    {no, order.TTL + order.ActiveOrderGrace},
		k.Key(keys.OrderChannel, no):      {"WECHAT", keys.PaymentChannelTTL},
		k.Key(keys.OrderReceiptEmail, no): {"ann@example.com", order.TTL + order.ReceiptEmailGrace},
	} {
		require.Equal(t, want.v, c.Get(t.Context(), key).Val(), key)
		require.InDelta(t, want.ttl.Seconds(), c.PTTL(t.Context(), key).Val().Seconds(), 10, key)
	}
	require.Zero(t, c.Exists(t.Context(), k.OrderCreateLock("pro-month", "ann")).Val(), "the lock is released")

	var row store.PaymentOrder
	require.NoError(t, b.db.Where("out_trade_no = ?", no).Take(&row).Error)
	require.Equal(t, "PENDING", row.Status)
	require.EqualValues(t, 1500, row.AmountFen)
}

func TestOrderSecondCreateWhilePendingIs409NamingIt(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	bob := b.token(t, "bob", httpapi.RoleUser)
	status, _, first := b.do(t, http.MethodPost, "/v1/payments/orders", bob, `{"product":"agent-recharge","amountFen":5000,"channel":"ALIPAY"}`)
	require.Equal(t, http.StatusCreated, status, "%v", first)
	require.Nil(t, first["receiptEmail"])
	for _, body := range []string{
		`{"product":"agent-recharge","amountFen":100,"channel":"ALIPAY"}`,
		`{"product":"pro-month","amountFen":1500,"channel":"WECHAT"}`,
	} {
		status, _, out := b.do(t, http.MethodPost, "/v1/payments/orders", bob, body)
		require.Equal(t, http.StatusConflict, status, "%v", out)
		require.Equal(t, "conflict", errorCode(t, out))
		require.Equal(t, first["outTradeNo"], out["error"].(map[string]any)["outTradeNo"])
	}
	require.EqualValues(t, 1, b.orderRows(t))
}

func TestOrderConcurrentCreatesGiveOne201(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	cat := b.token(t, "cat", httpapi.RoleUser)
	statuses, errs := make([]int, 10), make([]error, 10)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			statuses[i], errs[i] = b.status(http.MethodPost, "/v1/payments/orders", cat, `{"product":"pro-month","amountFen":1500,"channel":"ALIPAY"}`)
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Fatalf("unexpected status %d in %v", s, statuses)
		}
	}
	require.Equal(t, 1, created, "%v", statuses)
	require.EqualValues(t, 1, b.orderRows(t))
}

func TestOrderHeldLockIs409(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	lock := b.redis.Keys().OrderCreateLock("agent-recharge", "dan")
	require.NoError(t, b.redis.Client(keys.OrderCreateLock.DB).Set(t.Context(), lock, "another-holder", keys.PaymentLockTTL).Err())
	status, h, out := b.do(t, http.MethodPost, "/v1/payments/orders", b.token(t, "dan", httpapi.RoleUser),
		`{"product":"agent-recharge","amountFen":100,"channel":"ALIPAY"}`)
	require.Equal(t, http.StatusConflict, status, "%v", out)
	require.NotEmpty(t, h.Get("Retry-After"))
	require.Equal(t, "another-holder", b.redis.Client(keys.OrderCreateLock.DB).Get(t.Context(), lock).Val())
	require.Zero(t, b.orderRows(t))
}

func TestOrderBadInputIs400AndCreatesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	eve := b.token(t, "eve", httpapi.RoleUser)
	for name, body := range map[string]string{
		"product":      `{"product":"gold","amountFen":100,"channel":"ALIPAY"}`,
		"no product":   `{"amountFen":100,"channel":"ALIPAY"}`,
		"channel":      `{"product":"agent-recharge","amountFen":100,"channel":"PAYPAL"}`,
		"zero":         `{"product":"agent-recharge","amountFen":0,"channel":"ALIPAY"}`,
		"negative":     `{"product":"agent-recharge","amountFen":-1,"channel":"ALIPAY"}`,
		"too much":     fmt.Sprintf(`{"product":"agent-recharge","amountFen":%d,"channel":"ALIPAY"}`, order.RechargeMaxFen+1),
		"fraction":     `{"product":"agent-recharge","amountFen":1.5,"channel":"ALIPAY"}`,
		"pro price":    `{"product":"pro-month","amountFen":1,"channel":"ALIPAY"}`,
		"email":        `{"product":"agent-recharge","amountFen":100,"channel":"ALIPAY","receiptEmail":"not-an-address"}`,
		"email CRLF":   `{"product":"agent-recharge","amountFen":100,"channel":"ALIPAY","receiptEmail":"eve@example.com\r\nBcc: x@example.com"}`,
		"display name": `{"product":"agent-recharge","amountFen":100,"channel":"ALIPAY","receiptEmail":"Eve <eve@example.com>"}`,
		"not JSON":     `product=pro-month`,
	} {
		status, _, out := b.do(t, http.MethodPost, "/v1/payments/orders", eve, body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", name, out)
		require.Equal(t, "bad_request", errorCode(t, out), name)
	}
	require.Zero(t, b.orderRows(t))
	require.Zero(t, b.redis.Client(keys.ActiveOrder.DB).Exists(t.Context(), b.redis.Keys().Key(keys.ActiveOrder, "eve")).Val())
}

func TestOrderGetByOwnerAdminAndOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	fay := b.token(t, "fay", httpapi.RoleUser)
	status, _, created := b.do(t, http.MethodPost, "/v1/payments/orders", fay, `{"product":"agent-recharge","amountFen":250,"channel":"WECHAT"}`)
	require.Equal(t, http.StatusCreated, status, "%v", created)
	path := "/v1/payments/orders/" + created["outTradeNo"].(string)

	status, _, got := b.do(t, http.MethodGet, path, fay, "")
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, created, got)
	status, _, got = b.do(t, http.MethodGet, path, b.token(t, "root", httpapi.RoleAdmin), "")
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, created["outTradeNo"], got["outTradeNo"])

	status, _, got = b.do(t, http.MethodGet, path, b.token(t, "gus", httpapi.RoleUser), "")
	require.Equal(t, http.StatusNotFound, status, "%v", got)
	status, _, _ = b.do(t, http.MethodGet, "/v1/payments/orders/nope", fay, "")
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = b.do(t, http.MethodGet, path, b.token(t, "svc", httpapi.RoleService), "")
	require.Equal(t, http.StatusForbidden, status)
	status, _, _ = b.do(t, http.MethodGet, path, "", "")
	require.Equal(t, http.StatusUnauthorized, status)
}
