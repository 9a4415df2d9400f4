package messaging

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// WatermillLogger is a watermill.LoggerAdapter on slog that asks the handler
// whether a level is enabled before it turns the fields into attributes.
// Watermill's own slog adapter converts first: the Router logs two trace
// lines and a field map per message, so with trace off that was a slice and
// a call into slog for each, thrown away. levels maps a line's level to the
// one it is logged at, as watermill.NewSlogLoggerWithLevelMapping does.
func WatermillLogger(log *slog.Logger, levels map[slog.Level]slog.Level) watermill.LoggerAdapter {
	return &watermillLogger{log: log, levels: levels}
}

type watermillLogger struct {
	log    *slog.Logger
	levels map[slog.Level]slog.Level
}

func (l *watermillLogger) Error(msg string, err error, fields watermill.LogFields) {
	l.emit(slog.LevelError, msg, fields, slog.Any("error", err))
}

func (l *watermillLogger) Info(msg string, fields watermill.LogFields) {
	l.emit(slog.LevelInfo, msg, fields)
}

func (l *watermillLogger) Debug(msg string, fields watermill.LogFields) {
	l.emit(slog.LevelDebug, msg, fields)
}

func (l *watermillLogger) Trace(msg string, fields watermill.LogFields) {
	l.emit(watermill.LevelTrace, msg, fields)
}

func (l *watermillLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return &watermillLogger{log: l.log.With(attrs(fields)...), levels: l.levels}
}

func (l *watermillLogger) emit(level slog.Level, msg string, fields watermill.LogFields, extra ...any) {
	if to, ok := l.levels[level]; ok {
		level = to
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, msg, append(attrs(fields), extra...)...)
}

// attrs are fields as slog attributes.
func attrs(fields watermill.LogFields) []any {
	out := make([]any, 0, len(fields)+1)
	for k, v := range fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}
