package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/stretchr/testify/require"
)

// Behind a proxy that appends to X-Forwarded-For (nginx, cloud
// load balancers), the client writes the left entries. The client address
// is the rightmost entry that is not a trusted proxy: a client that changes
// the spoofed left entry on every request still meets its per-IP limits.
func TestClientAddressIsTheRightmostUntrustedHop(t *testing.T) {
	t.Parallel()
	// The test's client connects from 127.0.0.1, the proxy's address.
	b := setup(t, options{proxies: httpapi.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	spoofed := func(i int) string { return fmt.Sprintf("203.0.113.%d, 10.9.9.9", i) }

	// Email codes: 3 an hour per client address.
	for i := range 3 {
		status, _, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", fmt.Sprintf(`{"email":"s%d@example.com","scene":"REGISTER"}`, i),
			"X-Forwarded-For", spoofed(i))
		require.Equal(t, http.StatusAccepted, status, "%v", body)
	}
	status, _, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", `{"email":"s9@example.com","scene":"REGISTER"}`,
		"X-Forwarded-For", spoofed(9))
	require.Equal(t, http.StatusTooManyRequests, status, "a new left entry is not a new client: %v", body)
	require.Equal(t, "ip", body["error"].(map[string]any)["limit"])

	// Avatars: 3 an hour per client address, whoever uploads them.
	for i := range 3 {
		tok := b.token(t, fmt.Sprintf("face%d", i), httpapi.RoleUser)
		status, body := b.uploadWith(t, tok, "kind=avatar&name=a.png", images.SamplePNG(100, uint64(i)), "X-Forwarded-For", spoofed(10+i))
		require.Equal(t, http.StatusCreated, status, "%v", body)
	}
	status, body = b.uploadWith(t, b.token(t, "face9", httpapi.RoleUser), "kind=avatar&name=a.png", images.SamplePNG(100, 9), "X-Forwarded-For", spoofed(19))
	require.Equal(t, http.StatusTooManyRequests, status, "a new left entry is not a new client: %v", body)
}

// One IPv6 client holds a whole /64 (SLAAC, privacy addresses): the
// per-address limits count it by its /64, so a client that takes a new
// address for every request still meets them. Another /64 is another
// client; an IPv4-mapped address is its IPv4 address.
func TestIPv6ClientsAreCountedByTheirSlash64(t *testing.T) {
	t.Parallel()
	b := setup(t, options{proxies: httpapi.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	code := func(i int, client string) (int, map[string]any) {
		status, _, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", fmt.Sprintf(`{"email":"v6-%d@example.com","scene":"REGISTER"}`, i),
			"X-Forwarded-For", client)
		return status, body
	}

	// Email codes: 3 an hour per client.
	for i, client := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "[2001:db8:1:2:aaaa::3]:41234"} {
		status, body := code(i, client)
		require.Equal(t, http.StatusAccepted, status, "%v", body)
	}
	status, body := code(3, "2001:db8:1:2:ffff:ffff:ffff:ffff")
	require.Equal(t, http.StatusTooManyRequests, status, "a new address in the same /64 is the same client: %v", body)
	require.Equal(t, "ip", body["error"].(map[string]any)["limit"])
	status, body = code(4, "2001:db8:1:3::1")
	require.Equal(t, http.StatusAccepted, status, "another /64 is another client: %v", body)

	// IPv4: each address is a client; its IPv4-mapped form is the same one.
	for i, client := range []string{"198.51.100.7", "::ffff:198.51.100.7", "198.51.100.7"} {
		status, body := code(10+i, client)
		require.Equal(t, http.StatusAccepted, status, "%v", body)
	}
	status, body = code(13, "::ffff:198.51.100.7")
	require.Equal(t, http.StatusTooManyRequests, status, "the mapped address is the IPv4 client: %v", body)
	status, body = code(14, "198.51.100.8")
	require.Equal(t, http.StatusAccepted, status, "the next IPv4 address is another client: %v", body)

	// Avatars: 3 an hour per client, whoever uploads them.
	for i := range 3 {
		tok := b.token(t, fmt.Sprintf("v6face%d", i), httpapi.RoleUser)
		status, body := b.uploadWith(t, tok, "kind=avatar&name=a.png", images.SamplePNG(100, uint64(i)), "X-Forwarded-For", fmt.Sprintf("2001:db8:7:7::%x", i+1))
		require.Equal(t, http.StatusCreated, status, "%v", body)
	}
	status, body = b.uploadWith(t, b.token(t, "v6face9", httpapi.RoleUser), "kind=avatar&name=a.png", images.SamplePNG(100, 9),
		"X-Forwarded-For", "2001:db8:7:7:1234::9")
	require.Equal(t, http.StatusTooManyRequests, status, "a new address in the same /64 is the same client: %v", body)
}
