package store

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"

	"github.com/eisland/isle/internal/luascript"
	"github.com/eisland/isle/internal/tracing"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// scriptSpans is a go-redis hook that runs each Lua script (EVALSHA, or
// EVAL after a NOSCRIPT) in a span named after its file, "redis
// deduct.lua", so that a trace shows the money and rate-limit scripts
// (doc/tracing.md). Other commands pass as they are.
type scriptSpans struct{}

func (scriptSpans) DialHook(next redis.DialHook) redis.DialHook { return next }

func (scriptSpans) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (scriptSpans) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		script := scriptOf(cmd)
		if script == "" {
			return next(ctx, cmd)
		}
		ctx, span := tracing.Tracer().Start(ctx, "redis "+script, trace.WithSpanKind(trace.SpanKindClient))
		err := next(ctx, cmd)
		if span.IsRecording() {
			span.SetAttributes(attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", cmd.Name()))
		}
		failed := err
		if errors.Is(err, redis.Nil) {
			failed = nil // an empty answer, not a failure
		}
		tracing.End(span, failed)
		return err
	}
}

// scriptOf is the file name of the script cmd runs, "" for a command that
// runs none.
func scriptOf(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	switch cmd.Name() {
	case "evalsha", "evalsha_ro":
		sha, _ := args[1].(string)
		return cmp.Or(luascript.Name(sha), "script")
	case "eval", "eval_ro":
		src, _ := args[1].(string)
		sum := sha1.Sum([]byte(src))
		return cmp.Or(luascript.Name(hex.EncodeToString(sum[:])), "script")
	}
	return ""
}
