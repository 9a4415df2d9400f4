package store

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"

	"github.com/eisland/isle/internal/kit/luascript"
	"github.com/eisland/isle/internal/kit/tracing"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// scriptSpans is a go-redis hook that runs each Lua script (EVALSHA, or
// EVAL after a NOSCRIPT) in a span named after its file, "redis
// deduct.lua", so that a trace shows the money and rate-limit scripts
// (doc/tracing.md); in a pipeline, each script gets its span, siblings
// under the caller's. Other commands pass as they are.
type scriptSpans struct{}

func (scriptSpans) DialHook(next redis.DialHook) redis.DialHook { return next }

func (scriptSpans) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var spans []trace.Span // one per script command, nil for the others
		for i, cmd := range cmds {
			script := scriptOf(cmd)
			if script == "" {
				continue
			}
			if spans == nil {
				spans = make([]trace.Span, len(cmds))
			}
			_, spans[i] = tracing.Tracer().Start(ctx, "redis "+script, trace.WithSpanKind(trace.SpanKindClient))
		}
		err := next(ctx, cmds)
		for i, span := range spans {
			if span != nil {
				endScriptSpan(span, cmds[i], cmds[i].Err())
			}
		}
		return err
	}
}

func (scriptSpans) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		script := scriptOf(cmd)
		if script == "" {
			return next(ctx, cmd)
		}
		ctx, span := tracing.Tracer().Start(ctx, "redis "+script, trace.WithSpanKind(trace.SpanKindClient))
		err := next(ctx, cmd)
		endScriptSpan(span, cmd, err)
		return err
	}
}

// endScriptSpan ends the span of the script cmd ran, which answered err.
func endScriptSpan(span trace.Span, cmd redis.Cmder, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", cmd.Name()))
	}
	if errors.Is(err, redis.Nil) {
		err = nil // an empty answer, not a failure
	}
	tracing.End(span, err)
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
