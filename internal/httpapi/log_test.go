package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/httpapi"
	"github.com/stretchr/testify/require"
)

// logBuffer collects log output written by the server's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// requestLines returns the "http request" lines logged until now, by request id.
func (b *logBuffer) requestLines(t *testing.T) map[string]map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "%s", sc.Bytes())
		if line["msg"] == "http request" {
			out[line["request_id"].(string)] = line
		}
	}
	return out
}

// The request log names the caller of an authenticated route, and no one
// for a route without a token.
func TestRequestLogCarriesSubjectAndRole(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
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
		lines = logs.requestLines(t)
		return len(lines) == 3
	}, 5*time.Second, 10*time.Millisecond)
	authed := lines["log-authed"]
	require.Equal(t, "/v1/me", authed["route"])
	require.Equal(t, "svc-a", authed["sub"])
	require.Equal(t, "service", authed["role"])
	for _, id := range []string{"log-anonymous", "log-refused"} {
		require.NotContains(t, lines[id], "sub", id)
		require.NotContains(t, lines[id], "role", id)
	}
}
