package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// islectl console asks for no token, so it listens on loopback only,
// unless -allow-remote.
func TestConsoleRefusesANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "192.0.2.1:8090", "example.com:8090", "nonsense"} {
		err := run(context.Background(), []string{"console", "-addr", addr}, func(string) (string, bool) { return "", false }, io.Discard, io.Discard)
		require.ErrorIs(t, err, errUsage, addr)
	}
	for addr, want := range map[string]bool{"127.0.0.1:8090": true, "[::1]:1": true, "localhost:8090": true, "127.1.2.3:9": true, "10.0.0.1:1": false} {
		got, err := isLoopback(addr)
		require.NoError(t, err)
		require.Equal(t, want, got, addr)
	}
}

// A request naming another host than a loopback one is refused: a page on
// a name an attacker points at 127.0.0.1 (DNS rebinding) cannot read it.
func TestLoopbackHostsOnly(t *testing.T) {
	t.Parallel()
	h := loopbackHosts(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for host, want := range map[string]int{
		"127.0.0.1:8090": http.StatusOK, "localhost:8090": http.StatusOK, "[::1]:8090": http.StatusOK, "localhost": http.StatusOK,
		"evil.example:8090": http.StatusMisdirectedRequest, "192.0.2.1:8090": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, host)
	}
}

// islectl console serves the pages on loopback, says so, refuses a form
// without its CSRF token, and stops with its context.
func TestConsoleServesOnLoopback(t *testing.T) {
	t.Parallel()
	dsn := storetest.MySQLDSN(t)
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	require.NoError(t, err)
	_, err = store.Migrate(context.Background(), db)
	require.NoError(t, err)
	require.NoError(t, store.CloseMySQL(db))
	_, prefix := storetest.AMQP(t)
	c, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	host, port, _ := strings.Cut(storetest.RedisAddr(), ":")
	env := map[string]string{
		"MYSQL_DSN": c.FormatDSN(), "REDIS_HOST": host, "REDIS_PORT": port, "REDIS_KEY_PREFIX": storetest.Unique("isletest:") + ":",
		"RABBITMQ_NAME_PREFIX": prefix, "RABBITMQ_MANAGEMENT_URL": storetest.ManagementURL(), "USER": "ops",
		"WORKER_OPS_ADDR": "", "RELAY_OPS_ADDR": "", "RECONCILE_OPS_ADDR": "",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &storetest.LogBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"console", "-addr", "127.0.0.1:0"}, lookup, out, io.Discard) }()
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`operator console on (http://\S+/) \(no token asked: loopback only; actions are logged as local:ops\)`).FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, out.String())

	for _, page := range []string{"", "dead", "money?user=nobody", "jobs"} {
		resp, err := http.Get(base + page)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, resp.StatusCode, page)
		require.Contains(t, string(body), "operator <b>local:ops</b>", page)
	}
	resp, err := http.PostForm(base+"jobs/outbox-purge/run", url.Values{})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("islectl console did not stop")
	}
}
