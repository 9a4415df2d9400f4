package httpapi_test

import (
	"net/netip"
	"testing"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/stretchr/testify/require"
)

// The client address as each configuration reads a request's peer and
// X-Forwarded-For: whatever a client writes on the left never counts once
// a trusted proxy appended the address it saw.
func TestClientIPReadsXForwardedForFromTheRight(t *testing.T) {
	t.Parallel()
	prefixes := func(ps ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	none := httpapi.Proxies{}
	nginx := httpapi.Proxies{Trusted: prefixes("10.0.0.5/32")}
	lbs := httpapi.Proxies{Trusted: prefixes("10.0.0.0/24", "2001:db8:1::/48")}
	two := httpapi.Proxies{Hops: 2}
	for _, c := range []struct {
		name   string
		p      httpapi.Proxies
		peer   string
		xff    []string
		client string
	}{
		{"no proxy trusted: the peer", none, "198.51.100.7:5000", []string{"203.0.113.5"}, "198.51.100.7"},
		{"no header", nginx, "10.0.0.5:5000", nil, "10.0.0.5"},
		{"nginx appends the client", nginx, "10.0.0.5:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a spoofed left entry", nginx, "10.0.0.5:5000", []string{"203.0.113.5, 198.51.100.7"}, "198.51.100.7"},
		{"the issue's reproduction", httpapi.Proxies{Trusted: prefixes("127.0.0.1/32")}, "127.0.0.1:5000", []string{"203.0.113.5, 10.9.9.9"}, "10.9.9.9"},
		{"spoofed entries on their own line", nginx, "10.0.0.5:5000", []string{"203.0.113.5, 203.0.113.6", "198.51.100.7"}, "198.51.100.7"},
		{"a peer that is no proxy is the client", nginx, "198.51.100.9:5000", []string{"203.0.113.5"}, "198.51.100.9"},
		{"through two trusted proxies", lbs, "10.0.0.5:5000", []string{"203.0.113.5, 198.51.100.7, 10.0.0.9"}, "198.51.100.7"},
		{"all trusted: the leftmost", lbs, "10.0.0.5:5000", []string{"10.0.0.7, 10.0.0.9"}, "10.0.0.7"},
		{"junk where the client was: the proxy's", lbs, "10.0.0.5:5000", []string{"203.0.113.5, junk, 10.0.0.9"}, "10.0.0.9"},
		{"junk at once: the peer", nginx, "10.0.0.5:5000", []string{"unknown"}, "10.0.0.5"},
		{"an empty entry: the peer", nginx, "10.0.0.5:5000", []string{"198.51.100.7, "}, "10.0.0.5"},
		{"ports on entries", nginx, "10.0.0.5:5000", []string{"203.0.113.5:1, 198.51.100.7:41234"}, "198.51.100.7"},
		{"IPv6 entries", lbs, "[2001:db8:1::2]:443", []string{"2001:db8:9::1, [2001:db8:9::7]:41234, 2001:db8:1::3"}, "2001:db8:9::7"},
		{"an IPv4-mapped entry", nginx, "10.0.0.5:5000", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"an IPv4-mapped peer", nginx, "[::ffff:10.0.0.5]:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"two hops", two, "10.1.1.1:5000", []string{"203.0.113.5, 198.51.100.7, 10.0.0.9"}, "198.51.100.7"},
		{"two hops, header too short: the peer", two, "10.1.1.1:5000", []string{"198.51.100.7"}, "10.1.1.1"},
		{"two hops, junk: the next hop", two, "10.1.1.1:5000", []string{"junk, 10.0.0.9"}, "10.0.0.9"},
		{"a peer without a port", nginx, "10.0.0.5", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a peer that is no address", nginx, "@unix", []string{"198.51.100.7"}, "@unix"},
	} {
		require.Equal(t, c.client, c.p.ClientIP(c.peer, c.xff), c.name)
	}
}

func TestFromProxy(t *testing.T) {
	t.Parallel()
	require.True(t, httpapi.LoopbackProxies.FromProxy("127.0.0.1:1"))
	require.True(t, httpapi.LoopbackProxies.FromProxy("[::1]:1"))
	require.False(t, httpapi.LoopbackProxies.FromProxy("10.0.0.1:1"))
	require.False(t, httpapi.Proxies{}.FromProxy("127.0.0.1:1"))
	require.True(t, httpapi.Proxies{Hops: 1}.FromProxy("198.51.100.1:1"))
}

// The per-address limits count an IPv4 client by its address and an IPv6
// one by its /64; an IPv4-mapped address is the IPv4 client.
func TestLimitAddress(t *testing.T) {
	t.Parallel()
	for client, want := range map[string]string{
		"198.51.100.7":                            "198.51.100.7",
		"::ffff:198.51.100.7":                     "198.51.100.7",
		"2001:db8:1:2::1":                         "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:ffff:ffff":        "2001:db8:1:2::/64",
		"2001:0db8:0001:0002:abcd:0000:0000:0009": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":                         "2001:db8:1:3::/64",
		"fe80::1%eth0":                            "fe80::/64",
		"::1":                                     "::/64",
		"@unix":                                   "@unix",
	} {
		require.Equal(t, want, httpapi.LimitAddress(client), client)
	}
}
