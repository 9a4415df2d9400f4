package e2e_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// A running API whose Redis loses its data refuses a user banned with
// islectl again, and puts the ban back into Redis, within its check period.
func TestRunningAPIRestoresBansAfterRedisLosesThem(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	e["API_BAN_CHECK_INTERVAL"] = "1s"
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	rdb, err := store.OpenRedis(store.RedisConfig{Addr: storetest.RedisAddr(), KeyPrefix: e["REDIS_KEY_PREFIX"]})
	require.NoError(t, err)
	t.Cleanup(func() { storetest.Wipe(t, rdb); rdb.Close() })
	api := start(t, e, "api")
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(api.waitFor(t, 30*time.Second, "api started"))[1]
	out, code = islectl(t, e, "users", "ban", "mallory", "-reason", "test")
	require.Zero(t, code, out)
	tok, code := islectl(t, e, "token", "-user", "mallory")
	require.Zero(t, code, tok)
	me := func() int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, me())

	storetest.Wipe(t, rdb) // Redis restarted without its data
	began := time.Now()
	for me() != http.StatusForbidden {
		require.Less(t, time.Since(began), 10*time.Second, "mallory is admitted after the wipe")
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("refused again %s after the wipe", time.Since(began))
	require.Eventually(t, func() bool {
		banned, err := store.NewBans(nil, rdb).IsBanned(t.Context(), "mallory")
		return err == nil && banned
	}, 10*time.Second, 20*time.Millisecond, "the API put the ban back into Redis")
	t.Logf("ban back in Redis %s after the wipe", time.Since(began))
}
