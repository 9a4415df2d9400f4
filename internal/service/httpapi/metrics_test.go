package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The API's metrics (routes, callers' statuses, the Go runtime)
// are for the operator's scraper, on the operations address (cmd/api); the
// public address serves them only when configured to.
func TestMetricsAreNotPublicByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	status, _, _ := b.get(t, "/healthz", "")
	require.Equal(t, http.StatusOK, status)
	status, _, raw := b.get(t, "/metrics", "")
	require.Equal(t, http.StatusNotFound, status, "%.200s", raw)
	require.NotContains(t, string(raw), "isle_http_requests_total")
}

// Configured to, the API's own address serves them too.
func TestMetricsOnThePublicAddressWhenConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t, options{publicMetrics: true})
	status, _, _ := b.get(t, "/healthz", "")
	require.Equal(t, http.StatusOK, status)
	status, _, raw := b.get(t, "/metrics", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), "isle_http_requests_total")
}
