package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// requestLines returns the "http request" lines logged until now, by request id.
func requestLines(t *testing.T, logs *storetest.LogBuffer) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range logs.LinesWith(t, "http request") {
		out[line["request_id"].(string)] = line
	}
	return out
}

// firstLine returns the first line logged with msg, waiting for it.
func firstLine(t *testing.T, logs *storetest.LogBuffer, msg string) map[string]any {
	t.Helper()
	var found map[string]any
	require.Eventually(t, func() bool {
		found = logs.Line(t, msg)
		return found != nil
	}, 5*time.Second, 10*time.Millisecond, "no line %q", msg)
	return found
}

// A line logged with the request's context carries its id, though neither
// the handler nor the platform adds it: the logger's handler does
// (correlation.Handler), as in every binary. A panic's line carries it too.
func TestLogLinesCarryTheRequestID(t *testing.T) {
	t.Parallel()
	logs := &storetest.LogBuffer{}
	var b *testBundle
	b = setup(t, options{logOut: logs, routes: []httpapi.Route{
		{Method: http.MethodGet, Path: "/test/log", Handle: func(w http.ResponseWriter, r *http.Request) error {
			b.log.InfoContext(r.Context(), "inside the handler", "n", 1)
			return httpapi.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		{Method: http.MethodGet, Path: "/test/panic", Handle: func(w http.ResponseWriter, r *http.Request) error {
			panic("boom")
		}},
	}})
	status, _, _ := b.do(t, http.MethodGet, "/test/log", "", "", "X-Request-Id", "log-inside")
	require.Equal(t, http.StatusOK, status)
	status, h, _ := b.do(t, http.MethodGet, "/test/panic", "", "", "X-Correlation-Id", "log-panic")
	require.Equal(t, http.StatusInternalServerError, status)
	require.Equal(t, "log-panic", h.Get("X-Request-Id"))

	inside := firstLine(t, logs, "inside the handler")
	require.Equal(t, "log-inside", inside["request_id"])
	require.EqualValues(t, 1, inside["n"])
	require.Equal(t, "log-panic", firstLine(t, logs, "handler panicked")["request_id"])
	// One request_id per line: none is added by hand beside the handler's.
	for _, raw := range logs.Lines() {
		require.LessOrEqual(t, strings.Count(raw, `"request_id":`), 1, raw)
	}
}

// The request log names the caller of an authenticated route, and no one
// for a route without a token.
func TestRequestLogCarriesSubjectAndRole(t *testing.T) {
	t.Parallel()
	logs := &storetest.LogBuffer{}
	b := setup(t, options{logOut: logs})
	status, _, _ := b.do(t, http.MethodGet, "/v1/me", b.token(t, "svc-a", httpapi.RoleService), "", "X-Request-Id", "log-authed")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = b.do(t, http.MethodGet, "/healthz", "", "", "X-Request-Id", "log-anonymous")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = b.do(t, http.MethodGet, "/v1/me", "", "", "X-Request-Id", "log-refused")
	require.Equal(t, http.StatusUnauthorized, status)

	// The line is written as the handler returns, which may be just after
	// the client has the answer.
	var lines map[string]map[string]any
	require.Eventually(t, func() bool {
		lines = requestLines(t, logs)
		return len(lines) == 3
	}, 5*time.Second, 10*time.Millisecond)
	authed := lines["log-authed"]
	require.Equal(t, "/v1/me", authed["route"])
	require.Equal(t, "svc-a", authed["sub"])
	require.Equal(t, "service", authed["role"])
	for _, id := range []string{"log-anonymous", "log-refused"} {
		t.Run(id, func(t *testing.T) {
			require.NotContains(t, lines[id], "sub")
			require.NotContains(t, lines[id], "role")
		})
	}
}
