package e2e_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/eisland/isle/internal/kit/browsertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envViewer names the trace viewer of TestTracesInTheViewer; by default
// the one scripts/up -tracing builds into bin/ (tools/viewer pins it).
const envViewer = "ISLE_TRACE_VIEWER"

// One charge and one paid order in the trace viewer scripts/up -tracing
// runs: the real binaries export to a viewer started for the test on free
// ports, whose JSON-RPC API must then hold both traces with their spans
// across api, worker and relay; a headless chromium opens each trace's
// page and saves it (viewer-charge.png, viewer-paid-order.png; also in
// ISLE_SCREENSHOTS). Skipped without the viewer.
func TestTracesInTheViewer(t *testing.T) {
	t.Parallel()
	bin := cmp.Or(os.Getenv(envViewer), filepath.Join("..", "bin", "otel-desktop-viewer"))
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no trace viewer at %s (scripts/up -tracing builds it; %s names another): %v", bin, envViewer, err)
	}
	v := startViewer(t, bin)
	sc := newTraceScene(t, v.otlp)
	v.waitTrace(t, chargeTrace, "isle-api POST /v1/agent/usage", "isle-api redis deduct.lua",
		"isle-worker "+sc.billing.Queue+" process", "isle-worker "+sc.usage.Queue+" process")
	paidTrace := v.findTrace(t, "isle-api", "/v1/payments/notify/")
	v.waitTrace(t, paidTrace, "isle-worker "+sc.notices.Queue+" process", "isle-worker mysql transaction",
		"isle-relay "+sc.receipts.RoutingKey+" publish", "isle-worker "+sc.receipts.Queue+" process", "isle-worker mail send")

	b := browsertest.New(t, 4*time.Minute)
	for _, shot := range []struct{ trace, want, file string }{
		{chargeTrace, "POST /v1/agent/usage", "viewer-charge.png"},
		{paidTrace, "isle-relay", "viewer-paid-order.png"},
	} {
		page := v.ui + "/traces/" + shot.trace
		var body string
		b.Do("open "+shot.file, chromedp.Navigate(page))
		ok := assert.Eventually(t, func() bool {
			body, _ = b.TryText("body")
			// The waterfall is drawn: its services are there (the names of
			// deep spans are cut short), and the page is done loading.
			return strings.Contains(body, shot.want) && strings.Contains(body, "isle-worker") &&
				!strings.Contains(body, "Loading trace detail")
		}, 30*time.Second, time.Second)
		b.Screenshot(shot.file)
		if !ok {
			t.Fatalf("the viewer's page of trace %s shows %q; it has %q", shot.trace, shot.want, body)
		}
	}
}

// viewer is otel-desktop-viewer (in-memory store) on ports of its own.
type viewer struct {
	otlp, ui string
}

// startViewer runs bin on free loopback ports: its OTLP receivers and its
// web UI with the JSON-RPC API beside it.
func startViewer(t *testing.T, bin string) *viewer {
	t.Helper()
	port := func() string {
		_, p, err := net.SplitHostPort(freeAddr(t))
		require.NoError(t, err)
		return p
	}
	httpPort, grpcPort, uiPort := port(), port(), port()
	log, err := os.Create(filepath.Join(t.ArtifactDir(), "viewer.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--http", httpPort, "--grpc", grpcPort, "--browser-port", uiPort, "--open-browser=false")
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); log.Close() })
	v := &viewer{otlp: "http://127.0.0.1:" + httpPort, ui: "http://127.0.0.1:" + uiPort}
	require.Eventually(t, func() bool {
		var n json.RawMessage
		return v.rpc("getStats", []any{}, &n) == nil
	}, time.Minute, 200*time.Millisecond, "the viewer's API answers (log: %s)", log.Name())
	return v
}

// rpc calls method of the viewer's JSON-RPC API and decodes its result.
func (v *viewer) rpc(method string, params any, result any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return err
	}
	resp, err := http.Post(v.ui+"/rpc", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return err
	}
	if answer.Error != nil {
		return fmt.Errorf("viewer: %s: %s", method, answer.Error.Message)
	}
	return json.Unmarshal(answer.Result, result)
}

// spans are "service span-name" of each span of trace id the viewer
// holds, from its searchSpans answer.
func (v *viewer) spans(id string) ([]string, error) {
	var trace struct {
		Spans []struct {
			SpanData struct {
				Name     string `json:"name"`
				Resource struct {
					Attributes []struct {
						Key   string `json:"key"`
						Value any    `json:"value"`
					} `json:"attributes"`
				} `json:"resource"`
			} `json:"spanData"`
		} `json:"spans"`
	}
	if err := v.rpc("searchSpans", []any{id}, &trace); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range trace.Spans {
		service := "?"
		for _, a := range s.SpanData.Resource.Attributes {
			if a.Key == "service.name" {
				service = fmt.Sprint(a.Value)
			}
		}
		out = append(out, service+" "+s.SpanData.Name)
	}
	return out, nil
}

// waitTrace waits until the viewer holds trace id with a span of each of
// want ("service span-name").
func (v *viewer) waitTrace(t *testing.T, id string, want ...string) {
	t.Helper()
	var seen []string
	ok := assert.Eventually(t, func() bool {
		var err error
		if seen, err = v.spans(id); err != nil {
			seen = []string{err.Error()}
			return false
		}
		all := strings.Join(seen, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond)
	if !ok {
		t.Fatalf("trace %s in the viewer with %q; it has %q", id, want, seen)
	}
}

// findTrace waits for a trace whose root span is of service and named
// with name in it, and returns its id.
func (v *viewer) findTrace(t *testing.T, service, name string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		var traces []struct {
			TraceID  string `json:"traceID"`
			RootSpan *struct {
				ServiceName string `json:"serviceName"`
				Name        string `json:"name"`
			} `json:"rootSpan"`
		}
		if v.rpc("searchTraces", []any{"0", strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)}, &traces) != nil {
			return false
		}
		for _, tr := range traces {
			if tr.RootSpan != nil && tr.RootSpan.ServiceName == service && strings.Contains(tr.RootSpan.Name, name) {
				id = tr.TraceID
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "a trace of %s with %q in the viewer", service, name)
	return id
}
