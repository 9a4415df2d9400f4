// Package app is the wiring Isle's binaries share: the prelude of the
// service binaries (Start: flags, configuration, logger, open services, a
// metrics registry; then their operations endpoints, Service.ServeOps),
// the logger, and opening MySQL, Redis and RabbitMQ with the checks every
// binary makes before it serves (schema version, start-up cleanup,
// topology declared, or checked present, before the first publish). Only
// packages under cmd/ import it.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/kit/correlation"
)

// StartupWait bounds how long a binary waits for a service that is not up yet
// (e.g. containers starting together) before giving up.
const StartupWait = 60 * time.Second

// NewLogger returns the binary's structured logger; every line carries the
// binary's name, and a line logged with a context (InfoContext, ...) the
// request id, correlation id and OpenTelemetry trace and span ids it
// carries (correlation.Handler).
func NewLogger(w io.Writer, level slog.Level, format, binary string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: readableDuration}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(correlation.Handler(h)).With("bin", binary)
}

// readableDuration logs a duration as text ("1.5s"): the JSON handler
// would write it as integer nanoseconds.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// retry calls op until it succeeds, ctx ends or StartupWait passes,
// logging each failure once per attempt.
func retry(ctx context.Context, log *slog.Logger, what string, op func(context.Context) error) error {
	deadline := time.Now().Add(StartupWait)
	delay := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("%s: %w (gave up after %s)", what, err, StartupWait)
		}
		log.WarnContext(ctx, "waiting for "+what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}
