package e2e_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// The API started with the PAYMENT_* variables of `islectl pay keys`'s
// payment.env, sourced by bash as scripts/up does, accepts the callbacks
// `islectl pay simulate` posts for its orders (at API_ADDR), and refuses
// one whose amount is not the order's.
func TestPaySimulateAgainstTheAPI(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	dir := payKeys(t, e)

	api := start(t, e, "api")
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(api.waitFor(t, 30*time.Second, "api started"))[1]
	ctl := maps.Clone(e)
	ctl["API_ADDR"] = addr

	order := func(user, channel string, fen int64) string {
		tok, code := islectl(t, e, "token", "-user", user)
		require.Zero(t, code, tok)
		body, _ := json.Marshal(map[string]any{"product": "agent-recharge", "amountFen": fen, "channel": channel})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/payments/orders", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var o struct{ OutTradeNo string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		return o.OutTradeNo
	}
	ann, bob := order("ann", "ALIPAY", 5000), order("bob", "WECHAT", 3000)

	out, code = islectl(t, ctl, "pay", "simulate", "-dir", dir, "-order", ann)
	require.Zero(t, code, out)
	require.Contains(t, out, "POST http://"+addr+"/v1/payments/notify/alipay")
	require.Contains(t, out, "HTTP 200 OK\nsuccess\n")
	out, code = islectl(t, ctl, "pay", "simulate", "-dir", dir, "-order", bob)
	require.Zero(t, code, out)
	require.Contains(t, out, "HTTP 204 No Content")
	out, code = islectl(t, ctl, "pay", "simulate", "-dir", dir, "-order", bob, "-state", "CLOSED")
	require.Zero(t, code, out)

	out, code = islectl(t, ctl, "pay", "simulate", "-dir", dir, "-order", ann, "-amount", "1")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "HTTP 400 Bad Request\nfail\n")
	api.waitFor(t, 5*time.Second, "Alipay callback refused", "amount differs")
	out, code = islectl(t, ctl, "pay", "simulate", "-dir", dir, "-order", bob, "-channel", "alipay")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "was made for WECHAT, not ALIPAY")
}

// payKeys writes test gateway keys with `islectl pay keys` into a temp
// directory, sets e's PAYMENT_* from its payment.env as bash sources it
// (as scripts/up does), and returns the directory.
func payKeys(t *testing.T, e fleetEnv) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "paykeys")
	out, code := islectl(t, e, "pay", "keys", "-dir", dir)
	require.Zero(t, code, out)
	names := []string{"PAYMENT_ALIPAY_PUBLIC_KEY", "PAYMENT_ALIPAY_APP_ID", "PAYMENT_WECHAT_API_V3_KEY",
		"PAYMENT_WECHAT_PLATFORM_CERTS", "PAYMENT_WECHAT_MCH_ID"}
	script := `set -eu; . "$1"; shift; for v in "$@"; do printf '%s\0' "${!v}"; done`
	cmd := exec.Command("bash", append([]string{"-c", script, "bash", filepath.Join(dir, "payment.env")}, names...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	raw, err := cmd.Output()
	require.NoError(t, err)
	values := strings.Split(string(raw), "\x00")
	require.Len(t, values, len(names)+1)
	for i, n := range names {
		require.NotEmpty(t, values[i], n)
		e[n] = values[i]
	}
	return dir
}
