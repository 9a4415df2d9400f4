package e2e_test

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/eisland/isle/internal/kit/browsertest"
	"github.com/stretchr/testify/require"
)

// envJaeger names the Jaeger binary of TestTracesInJaeger; by default the
// one scripts/up -tracing=jaeger builds into bin/. It runs with scripts/up's
// configuration, tools/jaeger/config.yaml, whose ISLE_JAEGER_UI names a
// build of Jaeger's web UI to serve (doc/tracing.md).
const envJaeger = "ISLE_JAEGER"

// One charge and one paid order in Jaeger: the real binaries export to a
// Jaeger started for the test, whose API must then hold both traces with
// their spans; when that Jaeger has its web UI, a headless chromium opens
// each trace's page and saves it (jaeger-charge.png, jaeger-paid-order.png;
// ISLE_SCREENSHOTS names a directory for them too). Skipped without Jaeger.
func TestTracesInJaeger(t *testing.T) {
	t.Parallel()
	bin := cmp.Or(os.Getenv(envJaeger), filepath.Join("..", "bin", "jaeger"))
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no Jaeger at %s (scripts/up -tracing=jaeger builds it; %s names another): %v", bin, envJaeger, err)
	}
	j := startJaeger(t, bin)
	sc := newTraceScene(t, j.otlp)
	j.waitTrace(t, chargeTrace, "POST /v1/agent/usage", "redis deduct.lua", sc.billing.Queue+" process", sc.usage.Queue+" process")
	// The paid order: its callback's trace reaches the receipt mail.
	paidTrace := j.findTrace(t, "isle-worker", sc.receipts.Queue+" process")
	j.waitTrace(t, paidTrace, sc.notices.Queue+" process", "mysql transaction", sc.receipts.RoutingKey+" publish", "mail send")

	// Jaeger built from its Go module (scripts/up -tracing=jaeger) has no web UI,
	// only a placeholder page, unless given a build of the UI (envJaegerUI;
	// doc/tracing.md); with the UI, each trace's page is opened and saved.
	if j.placeholderUI(t) {
		t.Logf("%s serves Jaeger's placeholder page, not its UI: traces checked through its API, no screenshot", bin)
		return
	}
	b := browsertest.New(t, 4*time.Minute)
	for _, shot := range []struct{ trace, want, file string }{
		{chargeTrace, sc.billing.Queue + " process", "jaeger-charge.png"},
		{paidTrace, "mail send", "jaeger-paid-order.png"},
	} {
		page := j.ui + "/trace/" + shot.trace
		require.Eventually(t, func() bool {
			b.Do("open "+shot.file, chromedp.Navigate(page))
			body, _ := b.TryText("body")
			return strings.Contains(body, shot.want) && strings.Contains(body, "isle-worker")
		}, 30*time.Second, time.Second, "Jaeger's page of trace %s shows %q", shot.trace, shot.want)
		b.Screenshot(shot.file)
	}
}

// jaeger is a Jaeger all-in-one (in-memory storage) on ports of its own.
type jaeger struct {
	otlp, ui string
}

// startJaeger runs bin with scripts/up's configuration on free loopback
// ports: its OTLP receivers and its query service (UI and API).
func startJaeger(t *testing.T, bin string) *jaeger {
	t.Helper()
	addrs := map[string]string{}
	for _, v := range []string{"JAEGER_QUERY_HTTP", "JAEGER_QUERY_GRPC", "JAEGER_OTLP_GRPC", "JAEGER_OTLP_HTTP"} {
		addrs[v] = freeAddr(t)
	}
	log, err := os.Create(filepath.Join(t.ArtifactDir(), "jaeger.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--config", filepath.Join("..", "tools", "jaeger", "config.yaml"))
	cmd.Env = os.Environ()
	for k, v := range addrs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); log.Close() })
	j := &jaeger{otlp: "http://" + addrs["JAEGER_OTLP_HTTP"], ui: "http://" + addrs["JAEGER_QUERY_HTTP"]}
	require.Eventually(t, func() bool {
		resp, err := http.Get(j.ui + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 200*time.Millisecond, "Jaeger's query service answers (log: %s)", log.Name())
	return j
}

// jaegerTrace is what Jaeger's HTTP API answers about traces.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		OperationName string `json:"operationName"`
	} `json:"spans"`
}

func (j *jaeger) get(t *testing.T, path string) []jaegerTrace {
	t.Helper()
	resp, err := http.Get(j.ui + path)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil
	}
	return body.Data
}

// waitTrace waits until Jaeger holds trace id with a span of each of ops.
func (j *jaeger) waitTrace(t *testing.T, id string, ops ...string) {
	t.Helper()
	var seen []string
	require.Eventually(t, func() bool {
		seen = seen[:0]
		for _, tr := range j.get(t, "/api/traces/"+id) {
			for _, s := range tr.Spans {
				seen = append(seen, s.OperationName)
			}
		}
		names := strings.Join(seen, "\n")
		for _, op := range ops {
			if !strings.Contains(names, op) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "trace %s in Jaeger with %q; it has %q", id, ops, seen)
}

// findTrace waits for a trace of service with an operation op and returns
// its id.
func (j *jaeger) findTrace(t *testing.T, service, op string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		q := url.Values{"service": {service}, "operation": {op}, "limit": {"1"}, "lookback": {"1h"}}
		if found := j.get(t, "/api/traces?"+q.Encode()); len(found) > 0 {
			id = found[0].TraceID
		}
		return id != ""
	}, 30*time.Second, 200*time.Millisecond, "a trace of %s with %q in Jaeger", service, op)
	return id
}

// placeholderUI says Jaeger serves the page it has when built without its
// UI's assets.
func (j *jaeger) placeholderUI(t *testing.T) bool {
	t.Helper()
	resp, err := http.Get(j.ui + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return strings.Contains(string(page), "not the Jaeger UI")
}
