package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"github.com/eisland/isle/internal/httpapi"
	"github.com/eisland/isle/internal/images"
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
