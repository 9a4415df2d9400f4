package config_test

import (
	"testing"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/stretchr/testify/require"
)

func TestRedisSentinelIsOffByDefault(t *testing.T) {
	t.Parallel()
	c, err := config.LoadAPI(env(map[string]string{"API_JWT_SECRET": "0123456789abcdef0123456789abcdef"}))
	require.NoError(t, err)
	require.Empty(t, c.Redis.SentinelAddrs)
	require.Empty(t, c.Redis.SentinelMaster)
	require.Equal(t, "127.0.0.1:6379", c.Redis.Addr)
}

func TestRedisSentinelConfig(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWorker(env(map[string]string{
		"REDIS_SENTINEL_ADDRS":    " 10.0.0.5:26379, 10.0.0.6:26379 ,,10.0.0.7:26379",
		"REDIS_SENTINEL_MASTER":   "isle",
		"REDIS_SENTINEL_PASSWORD": "s3cret",
		"REDIS_PASSWORD":          "p",
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.5:26379", "10.0.0.6:26379", "10.0.0.7:26379"}, c.Redis.SentinelAddrs)
	require.Equal(t, "isle", c.Redis.SentinelMaster)
	require.Equal(t, "s3cret", c.Redis.SentinelPassword)
	require.Equal(t, "p", c.Redis.Password)
}

func TestRedisSentinelNeedsTheMasterName(t *testing.T) {
	t.Parallel()
	for _, load := range []func(func(string) (string, bool)) error{
		func(e func(string) (string, bool)) error { _, err := config.LoadWorker(e); return err },
		func(e func(string) (string, bool)) error { _, err := config.LoadReconcile(e); return err },
		func(e func(string) (string, bool)) error { _, err := config.LoadIslectl(e); return err },
	} {
		err := load(env(map[string]string{"REDIS_SENTINEL_ADDRS": "127.0.0.1:26379"}))
		require.ErrorContains(t, err, "REDIS_SENTINEL_MASTER: required when REDIS_SENTINEL_ADDRS is set")
	}
}

func TestRedisSentinelAddrsAreHostPort(t *testing.T) {
	t.Parallel()
	_, err := config.LoadWorker(env(map[string]string{
		"REDIS_SENTINEL_ADDRS":  "127.0.0.1:26379,sentinel-b",
		"REDIS_SENTINEL_MASTER": "isle",
	}))
	require.ErrorContains(t, err, `REDIS_SENTINEL_ADDRS="sentinel-b": want host:port`)
}
