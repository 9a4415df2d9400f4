package messaging_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestWatermillLoggerMapsLevelsAndKeepsFields(t *testing.T) {
	t.Parallel()
	var buf storetest.LogBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := messaging.WatermillLogger(log, map[slog.Level]slog.Level{
		slog.LevelInfo:  slog.LevelDebug,
		slog.LevelError: slog.LevelWarn,
	}).With(watermill.LogFields{"handler_name": "h"})

	l.Trace("per message", watermill.LogFields{"message_uuid": "m-1"})
	l.Info("Starting handler", watermill.LogFields{"topic": "q"})
	l.Error("Handler returned error", errors.New("boom"), nil)

	require.Nil(t, buf.Line(t, "per message"), "trace is below debug")
	start := buf.Line(t, "Starting handler")
	require.NotNil(t, start)
	require.Equal(t, "DEBUG", start["level"])
	require.Equal(t, "q", start["topic"])
	require.Equal(t, "h", start["handler_name"])
	failed := buf.Line(t, "Handler returned error")
	require.NotNil(t, failed)
	require.Equal(t, "WARN", failed["level"])
	require.Equal(t, "boom", failed["error"])
}

// The Router logs two trace lines for each message: with trace off they
// must cost nothing.
func TestWatermillLoggerSkipsDisabledLevelsWithoutAllocating(t *testing.T) {
	var buf storetest.LogBuffer
	l := messaging.WatermillLogger(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	fields := watermill.LogFields{"message_uuid": "m-1", "handler_name": "h"}
	allocs := testing.AllocsPerRun(100, func() { l.Trace("Received message", fields) })
	require.Zero(t, allocs)
	require.Empty(t, buf.String())
}
