package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/stretchr/testify/require"
)

// Every binary's logger names the binary and adds the ids a context carries.
func TestNewLoggerAddsCorrelationIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := app.NewLogger(&buf, slog.LevelInfo, "json", "worker")
	ctx := correlation.WithCorrelationID(context.Background(), "trace-9")
	log.InfoContext(ctx, "handled", "took", 1500*time.Millisecond)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	require.Equal(t, "worker", line["bin"])
	require.Equal(t, "trace-9", line["correlation_id"])
	require.Equal(t, "1.5s", line["took"])
	require.NotContains(t, line, "request_id")
}
