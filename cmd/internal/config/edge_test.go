package config_test

import (
	"testing"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/stretchr/testify/require"
)

const testKey = "0123456789abcdef0123456789abcdef"

func loadAPI(t *testing.T, m map[string]string) (config.API, error) {
	t.Helper()
	all := map[string]string{"API_JWT_SECRET": testKey}
	for k, v := range m {
		all[k] = v
	}
	return config.LoadAPI(env(all))
}

// The API's /metrics is served on its operations address, on
// loopback unless set, as the other binaries'; on the public address only
// when asked.
func TestAPIMetricsOnTheOpsAddress(t *testing.T) {
	t.Parallel()
	c, err := loadAPI(t, nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9093", c.HTTP.OpsAddr)
	require.False(t, c.HTTP.PublicMetrics)
	c, err = loadAPI(t, map[string]string{"API_OPS_ADDR": "", "API_METRICS_PUBLIC": "true"})
	require.NoError(t, err)
	require.Empty(t, c.HTTP.OpsAddr)
	require.True(t, c.HTTP.PublicMetrics)
}

// The proxies whose X-Forwarded-For entries the API believes.
func TestAPITrustedProxies(t *testing.T) {
	t.Parallel()
	c, err := loadAPI(t, nil)
	require.NoError(t, err)
	require.False(t, c.HTTP.Proxies.Enabled(), "none by default: the client is the peer")

	c, err = loadAPI(t, map[string]string{"API_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7,2001:db8::/32, 10.1.2.3/16, ::ffff:198.51.100.0/120"})
	require.NoError(t, err)
	var got []string
	for _, p := range c.HTTP.Proxies.Trusted {
		got = append(got, p.String())
	}
	require.Equal(t, []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "10.1.0.0/16", "198.51.100.0/24"}, got)
	require.Zero(t, c.HTTP.Proxies.Hops)
	require.False(t, c.HTTP.TrustProxyOld)

	c, err = loadAPI(t, map[string]string{"API_TRUSTED_PROXY_HOPS": "2"})
	require.NoError(t, err)
	require.Equal(t, httpapi.Proxies{Hops: 2}, c.HTTP.Proxies)

	// The old switch trusts a proxy on the same machine only, and says so.
	c, err = loadAPI(t, map[string]string{"API_TRUST_PROXY": "true"})
	require.NoError(t, err)
	require.Equal(t, httpapi.LoopbackProxies, c.HTTP.Proxies)
	require.True(t, c.HTTP.TrustProxyOld)
	require.True(t, c.HTTP.Proxies.FromProxy("127.0.0.1:1"))
	require.False(t, c.HTTP.Proxies.FromProxy("10.0.0.1:1"), "not a private range: clients connect from those too")

	_, err = loadAPI(t, map[string]string{
		"API_TRUSTED_PROXIES": "10.0.0.0/33,nope,0.0.0.0/0,::/0,fe80::1%eth0", "API_TRUSTED_PROXY_HOPS": "99",
	})
	require.ErrorContains(t, err, `API_TRUSTED_PROXIES="10.0.0.0/33": not an address or a CIDR`)
	require.ErrorContains(t, err, `API_TRUSTED_PROXIES="nope": not an address or a CIDR`)
	require.ErrorContains(t, err, `API_TRUSTED_PROXIES="0.0.0.0/0": trusts every address`)
	require.ErrorContains(t, err, `API_TRUSTED_PROXIES="::/0": trusts every address`)
	require.ErrorContains(t, err, `API_TRUSTED_PROXIES="fe80::1%eth0": not an address or a CIDR`)
	require.ErrorContains(t, err, `API_TRUSTED_PROXY_HOPS="99": out of range 0..16`)
	_, err = loadAPI(t, map[string]string{"API_TRUSTED_PROXIES": "10.0.0.0/8", "API_TRUSTED_PROXY_HOPS": "1"})
	require.ErrorContains(t, err, "not both")
	_, err = loadAPI(t, map[string]string{"API_TRUST_PROXY": "true", "API_TRUSTED_PROXIES": "10.0.0.0/8"})
	require.ErrorContains(t, err, "API_TRUST_PROXY")
	require.ErrorContains(t, err, "deprecated")
}
