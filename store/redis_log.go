package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// LogRedisTo sends go-redis's own log lines to log instead of its default,
// a plain line on stderr each. go-redis has one logger per process: the
// binaries call this once, when they open Redis. A line keeps its text;
// its level comes from what it says (RedisLogger).
func LogRedisTo(log *slog.Logger) { redis.SetLogger(NewRedisLogger(log)) }

// RedisLogger is go-redis's logging interface on a slog.Logger. Lines that
// report a failure or a dropped message are warnings. Through Sentinel,
// each database's client (doc/keys.md: up to 15) logs the master it
// follows when it first connects and after a failover ("sentinel: new
// master"): the first such line for an address is info, so a failover
// shows once per process, and its repeats are debug, as is the routine
// "sentinel: selected addr".
type RedisLogger struct {
	log *slog.Logger

	mu     sync.Mutex
	master string // the last master address logged at info
}

// NewRedisLogger returns a RedisLogger writing to log.
func NewRedisLogger(log *slog.Logger) *RedisLogger { return &RedisLogger{log: log} }

// Printf logs one go-redis line.
func (l *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := "redis: " + strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.Log(ctx, l.level(msg), msg)
}

func (l *RedisLogger) level(msg string) slog.Level {
	lower := strings.ToLower(msg)
	for _, bad := range []string{"fail", "error", "panic", "dropped", "rejected", "unexpected"} {
		if strings.Contains(lower, bad) {
			return slog.LevelWarn
		}
	}
	if _, addr, ok := strings.Cut(msg, "sentinel: new master="); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		if addr != l.master {
			l.master = addr
			return slog.LevelInfo
		}
	}
	return slog.LevelDebug
}
