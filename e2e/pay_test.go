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

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
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
// directory, sets e's PAYMENT_* from its payment.env and ISLE_DEV=1, as
// scripts/up does (its own function, use_local_paykeys), and returns the
// directory.
func payKeys(t *testing.T, e fleetEnv) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "paykeys")
	got, ok := useLocalPayKeys(t, dir, nil)
	require.True(t, ok, "no gateway variable set: test keys are used")
	for n, v := range got {
		require.NotEmpty(t, v, n)
		e[n] = v
	}
	return dir
}

// scriptsUpPayVars are the variables use_local_paykeys sets.
var scriptsUpPayVars = []string{"PAYMENT_ALIPAY_PUBLIC_KEY", "PAYMENT_ALIPAY_APP_ID", "PAYMENT_WECHAT_API_V3_KEY",
	"PAYMENT_WECHAT_PLATFORM_CERTS", "PAYMENT_WECHAT_MCH_ID", "PAYMENT_TEST_KEYS", "ISLE_DEV"}

// useLocalPayKeys runs scripts/lib.sh's use_local_paykeys on dir with the
// built islectl, in bash with only PATH and env set, and returns the
// variables it leaves exported (those set) and whether it used test keys.
func useLocalPayKeys(t *testing.T, dir string, env map[string]string) (map[string]string, bool) {
	t.Helper()
	script := `set -eu; . scripts/lib.sh; used=0; use_local_paykeys "$1" "$2" || used=$?; shift 2
printf '%s\0' "$used"; for v in "$@"; do printf '%s=%s\0' "$v" "${!v-}"; done`
	cmd := exec.Command("bash", append([]string{"-c", script, "bash", dir, filepath.Join(binDir, "islectl")}, scriptsUpPayVars...)...)
	cmd.Dir = ".."
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for n, v := range env {
		cmd.Env = append(cmd.Env, n+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	fields := strings.Split(string(raw), "\x00")
	require.Len(t, fields, len(scriptsUpPayVars)+2, stderr.String())
	got := map[string]string{}
	for _, f := range fields[1 : len(fields)-1] {
		n, v, _ := strings.Cut(f, "=")
		if v != "" {
			got[n] = v
		}
	}
	return got, fields[0] == "0"
}

// Test gateway keys are refused in production mode: scripts/up sets
// ISLE_DEV=1 only when it loads the keys it made, and the API with test
// keys refuses to start without it, and warns when it runs with them. The
// API used to trust them whatever ISLE_DEV said, so that whoever read
// var/paykeys could mark any order paid.
func TestTestGatewayKeysNeedDevMode(t *testing.T) {
	t.Parallel()
	storetest.Services(t) // the binaries are built only then
	dir := filepath.Join(t.TempDir(), "paykeys")
	keys, used := useLocalPayKeys(t, dir, nil)
	require.True(t, used)
	require.Equal(t, "1", keys["ISLE_DEV"])
	require.Equal(t, "true", keys["PAYMENT_TEST_KEYS"])
	again, used := useLocalPayKeys(t, dir, nil)
	require.True(t, used)
	require.Equal(t, keys, again, "the keys of the first run are reused")

	// The gateways' own keys: neither test keys nor ISLE_DEV.
	for _, set := range []string{"PAYMENT_ALIPAY_PUBLIC_KEY", "PAYMENT_WECHAT_API_V3_KEY"} {
		own := filepath.Join(t.TempDir(), "paykeys")
		got, used := useLocalPayKeys(t, own, map[string]string{set: "theirs"})
		require.False(t, used, set)
		require.Equal(t, map[string]string{set: "theirs"}, got, set)
		_, err := os.Stat(own)
		require.ErrorIs(t, err, os.ErrNotExist, "no keys made")
	}

	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	for n, v := range keys {
		if n != "ISLE_DEV" {
			e[n] = v
		}
	}
	for name, change := range map[string]func(fleetEnv){
		"no ISLE_DEV":           func(fleetEnv) {},
		"ISLE_DEV=0":            func(pe fleetEnv) { pe["ISLE_DEV"] = "0" },
		"the certificate alone": func(pe fleetEnv) { delete(pe, "PAYMENT_TEST_KEYS") },
	} {
		pe := maps.Clone(e)
		change(pe)
		p := start(t, pe, "api")
		select {
		case err := <-p.done:
			require.Error(t, err, name)
		case <-time.After(30 * time.Second):
			t.Fatalf("the API started with test keys: %s", name)
		}
		require.Contains(t, p.output(), "local test payment gateway keys", name)
		require.Contains(t, p.output(), "ISLE_DEV=1", name)
	}

	e["ISLE_DEV"] = "1"
	api := start(t, e, "api")
	api.waitFor(t, 30*time.Second, "api started")
	api.waitFor(t, 30*time.Second, `"level":"WARN"`, "local TEST payment gateway keys") // logged before "api started"
}

// A WeChat REVOKED callback through the built api and worker closes its
// order. It used to be answered 204 and dropped, the order left PENDING.
func TestWechatRevokedNoticeClosesItsOrderThroughTheFleet(t *testing.T) {
	t.Parallel()
	dsn := storetest.MySQLDSN(t)
	e := newFleetEnv(t, dsn)
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	dir := payKeys(t, e)
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { store.CloseMySQL(db) })

	api := start(t, e, "api")
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(api.waitFor(t, 30*time.Second, "api started"))[1]
	start(t, e, "worker").waitFor(t, 30*time.Second, "worker started")
	tok, code := islectl(t, e, "token", "-user", "rui")
	require.Zero(t, code, tok)
	body, _ := json.Marshal(map[string]any{"product": "agent-recharge", "amountFen": 800, "channel": "WECHAT"})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/payments/orders", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var o struct{ OutTradeNo string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	ctl := maps.Clone(e)
	ctl["API_ADDR"] = addr
	out, code = islectl(t, ctl, "pay", "simulate", "-dir", dir, "-order", o.OutTradeNo, "-state", "REVOKED")
	require.Zero(t, code, out)
	require.Contains(t, out, "HTTP 204 No Content")
	require.Eventually(t, func() bool {
		var got store.PaymentOrder
		return db.Where("out_trade_no = ?", o.OutTradeNo).Take(&got).Error == nil && got.Status == order.Closed
	}, 30*time.Second, 50*time.Millisecond, "the order closes")
}
