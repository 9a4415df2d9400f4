package config_test

import (
	"testing"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/service/console"
	"github.com/stretchr/testify/require"
)

// The console checks each binary's /healthz where the binary listens (on
// loopback when it listens everywhere); CONSOLE_HEALTH_URLS moves, adds or
// drops one, and a binary serving none is shown off.
func TestConsoleHealthURLs(t *testing.T) {
	t.Parallel()
	c, err := config.LoadIslectl(env(map[string]string{"API_ADDR": ":8080", "WORKER_OPS_ADDR": "0.0.0.0:7000", "RELAY_OPS_ADDR": ""}))
	require.NoError(t, err)
	require.Equal(t, []console.Probe{
		{Name: "api", URL: "http://127.0.0.1:8080/healthz"},
		{Name: "worker", URL: "http://127.0.0.1:7000/healthz"},
		{Name: "relay", URL: ""},
		{Name: "reconcile", URL: "http://127.0.0.1:9092/healthz"},
	}, c.Console.Probes)
	require.Equal(t, console.SampleIntervalDefault, c.Console.SampleInterval)

	a, err := config.LoadAPI(env(map[string]string{"API_JWT_SECRET": jwtKey, "CONSOLE_SAMPLE_INTERVAL": "2s",
		"CONSOLE_HEALTH_URLS": "worker=http://worker:9090/healthz, reconcile=, mailpit=http://127.0.0.1:8025/livez"}))
	require.NoError(t, err)
	require.True(t, a.Console.Enabled)
	require.Equal(t, 2*time.Second, a.Console.SampleInterval)
	require.Equal(t, []console.Probe{
		{Name: "api", URL: "http://127.0.0.1:8080/healthz"},
		{Name: "worker", URL: "http://worker:9090/healthz"},
		{Name: "relay", URL: "http://127.0.0.1:9091/healthz"},
		{Name: "mailpit", URL: "http://127.0.0.1:8025/livez"},
	}, a.Console.Probes)
	require.Equal(t, "@every 30m", a.Console.Reconcile.BalanceSyncSchedule, "the reconciler's own settings")

	a, err = config.LoadAPI(env(map[string]string{"API_JWT_SECRET": jwtKey, "ADMIN_CONSOLE_ENABLED": "false"}))
	require.NoError(t, err)
	require.False(t, a.Console.Enabled)

	_, err = config.LoadIslectl(env(map[string]string{"CONSOLE_HEALTH_URLS": "worker, =http://x/, relay=ftp://x/, api=http:///healthz"}))
	for _, bad := range []string{`"worker"`, `"=http://x/"`, `"relay=ftp://x/"`, `"api=http:///healthz"`} {
		require.ErrorContains(t, err, "CONSOLE_HEALTH_URLS="+bad)
	}
}

const jwtKey = "0123456789abcdef0123456789abcdef"
