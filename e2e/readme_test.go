package e2e_test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// The README's API examples run as written, against a fleet of the test's
// own: only the address and the path of the binaries are substituted.
func TestREADMEExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)<!-- readme-api-examples[^>]*-->\\s*```sh\\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "the README's API example block")

	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	api := start(t, e, "api")
	line := api.waitFor(t, 30*time.Second, "api started")
	start(t, e, "relay").waitFor(t, 30*time.Second, "relay started")
	start(t, e, "worker").waitFor(t, 30*time.Second, "worker started")
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(line)[1]
	ops := regexp.MustCompile(`"ops":"([^"]+)"`).FindStringSubmatch(line)[1]

	script := strings.ReplaceAll(string(block[1]), "http://127.0.0.1:8080", "http://"+addr)
	script = strings.ReplaceAll(script, "http://127.0.0.1:9093", "http://"+ops) // the API's operations address
	script = strings.ReplaceAll(script, "bin/islectl", filepath.Join(binDir, "islectl"))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = e.list()
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	require.NoError(t, cmd.Run(), stdout.String())
	got := stdout.String()
	for _, want := range []string{
		`{"status":"ok"}`,
		`"status":"ready"`,
		"created user alice",
		`"subject":"alice"`,
		`"balanceFen":"100.00000000"`,
		`{"error":{"code":"unauthorized","message":"missing bearer token"}}`,
		`"openapi":"3.0.3"`,
		`isle_http_requests_total{method="GET",route="/healthz",status="200"}`,
		"console without a token: 401",
		"<title>Overview · Isle console</title>",
		"pricing of gpt-demo set",
		`{"requestId":"demo-1","costFen":"4.80000000","costMicroFen":480000000,"deductedFen":"4.80000000","balanceFen":"95.20000000","replayed":false,"ledger":"queued"}`,
		`"sent":true`,
		`"kind":"avatar"`,
		`"sizeBytes":70`, // the README's 1x1 PNG
		`"contentType":"image/png"`,
		`"contentUrl":"/v1/objects/`,
		`"replication":"queued"`,
		`"replication":"done"`,
		"downloaded: the same bytes",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "file://", "no store URL reaches a user")
	// The worker may have written the deduction by the time of the read.
	require.Regexp(t, `\{"username":"alice","balanceFen":"95.20000000","pendingFen":"(4.80000000|0.00000000)"\}`, got)

	// The code was mailed by the worker: an .eml in the fleet's mail directory.
	mailDir := strings.TrimPrefix(strings.SplitN(e["EMAIL_MAILER_URL"], "?", 2)[0], "file://")
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(mailDir, "*.eml"))
		for _, f := range files {
			if raw, err := os.ReadFile(f); err == nil && strings.Contains(string(raw), "alice@example.com") {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the verification code's mail")

	// islectl users ban reaches the API's check.
	out, code = islectl(t, e, "users", "ban", "alice", "-reason", "test")
	require.Zero(t, code, out)
	tok, code := islectl(t, e, "token", "-user", "alice")
	require.Zero(t, code, tok)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	out, code = islectl(t, e, "users", "bans")
	require.Zero(t, code, out)
	require.Contains(t, out, "alice")
}
