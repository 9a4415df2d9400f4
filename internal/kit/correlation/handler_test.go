package correlation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"testing/slogtest"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// jsonLogger logs to buf through the wrapper, at debug level.
func jsonLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(correlation.Handler(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// lines decodes the JSON lines in buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

func TestHandlerAddsTheIDsTheContextCarries(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := jsonLogger(&buf)
	ctx := correlation.WithCorrelationID(correlation.WithRequestID(context.Background(), "req-1"), "trace-1")
	log.InfoContext(ctx, "both", "n", 1)
	log.WarnContext(correlation.WithRequestID(context.Background(), "req-2"), "request only")
	log.DebugContext(correlation.WithCorrelationID(context.Background(), "trace-3"), "trace only")
	log.InfoContext(context.Background(), "neither")
	log.Info("no context")
	log.InfoContext(correlation.WithRequestID(context.Background(), ""), "empty id")

	require.Equal(t, []map[string]any{
		{"level": "INFO", "msg": "both", "n": 1.0, "request_id": "req-1", "correlation_id": "trace-1"},
		{"level": "WARN", "msg": "request only", "request_id": "req-2"},
		{"level": "DEBUG", "msg": "trace only", "correlation_id": "trace-3"},
		{"level": "INFO", "msg": "neither"},
		{"level": "INFO", "msg": "no context"},
		{"level": "INFO", "msg": "empty id"},
	}, lines(t, &buf))
}

// A line logged inside an OpenTelemetry span carries its trace and span
// ids beside the correlation id; a span context that is not valid adds
// nothing.
func TestHandlerAddsTheSpansIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := jsonLogger(&buf)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(correlation.WithCorrelationID(context.Background(), "req-9"), sc)
	log.InfoContext(ctx, "in a span")
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), "no span")

	require.Equal(t, []map[string]any{
		{"level": "INFO", "msg": "in a span", "correlation_id": "req-9",
			"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"},
		{"level": "INFO", "msg": "no span"},
	}, lines(t, &buf))
}

// The ids stay top-level attributes when the logger has opened groups, and
// attributes added before and after a group keep their places.
func TestHandlerKeepsTheIDsOutOfGroups(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := jsonLogger(&buf).With("bin", "api").WithGroup("g").With("a", 1).WithGroup("h")
	ctx := correlation.WithRequestID(context.Background(), "req-1")
	log.InfoContext(ctx, "grouped", "b", 2)
	log.InfoContext(context.Background(), "grouped, no id", "b", 2)

	want := map[string]any{"bin": "api", "g": map[string]any{"a": 1.0, "h": map[string]any{"b": 2.0}}}
	got := lines(t, &buf)
	require.Len(t, got, 2)
	require.Equal(t, "req-1", got[0]["request_id"])
	for i, m := range got {
		for k, v := range want {
			require.Equal(t, v, m[k], "line %d, %s", i, k)
		}
	}
	require.NotContains(t, got[1], "request_id")
}

func TestHandlerKeepsTheWrappedHandlersLevel(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(correlation.Handler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := correlation.WithRequestID(context.Background(), "req-1")
	require.False(t, log.Enabled(ctx, slog.LevelInfo))
	log.InfoContext(ctx, "dropped")
	require.Zero(t, buf.Len())
}

// The wrapper is a well-behaved slog.Handler.
func TestHandlerConformsToSlog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := correlation.Handler(slog.NewJSONHandler(&buf, nil))
	results := func() []map[string]any {
		var out []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal(l, &m))
			out = append(out, m)
		}
		return out
	}
	require.NoError(t, slogtest.TestHandler(h, results))
}

func Example() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(correlation.Handler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))
	ctx := correlation.WithRequestID(context.Background(), "req-42")
	log.InfoContext(ctx, "charged", "user", "alice")
	log.Info("started")
	// Output:
	// level=INFO msg=charged user=alice request_id=req-42
	// level=INFO msg=started
}
