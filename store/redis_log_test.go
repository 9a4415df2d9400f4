package store_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

// go-redis's lines, graded: a master address shows once at info however
// many clients report it, failures are warnings, the routine is debug.
func TestRedisLoggerLevels(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	l := store.NewRedisLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx := context.Background()
	for range 3 { // three databases' clients on the same master
		l.Printf(ctx, "sentinel: selected addr=%s masterAddr=%s", "127.0.0.1:26391", "127.0.0.1:6391")
		l.Printf(ctx, "sentinel: new master=%q addr=%q", "isle", "127.0.0.1:6391")
	}
	l.Printf(ctx, "sentinel: GetMasterAddrByName addr=%s, master=%q failed: %s", "127.0.0.1:26392", "isle", "connection refused")
	l.Printf(ctx, "sentinel: new master=%q addr=%q", "isle", "127.0.0.1:6392")
	l.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v", 5, "refused")

	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		_, rest, _ := strings.Cut(line, "level=")
		level, _, _ := strings.Cut(rest, " ")
		levels = append(levels, level)
	}
	require.Equal(t, []string{"DEBUG", "INFO", "DEBUG", "DEBUG", "DEBUG", "DEBUG", "WARN", "INFO", "WARN"}, levels)
	require.Contains(t, buf.String(), `msg="redis: connection pool: failed to dial after 5 attempts: refused"`, "one prefix")
}
