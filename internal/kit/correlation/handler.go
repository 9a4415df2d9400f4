package correlation

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Handler returns h adding request_id, correlation_id, and an
// OpenTelemetry span's trace_id and span_id, to each record whose context
// carries them (WithRequestID, WithCorrelationID, a span); a record logged
// without a context, or with one that carries neither, is h's alone. The
// ids are top-level attributes even when the logger has opened groups.
// Only the *Context logging methods (InfoContext, ...) hand a context
// to the handler.
func Handler(h slog.Handler) slog.Handler { return &handler{h: h} }

type handler struct {
	h slog.Handler // the wrapped handler with every attribute and group added so far
	// Once a group is opened, attributes added to a record land inside it.
	// To keep the ids at the top level, root is the wrapped handler as it
	// was before the first group, and steps replay what came after.
	root  slog.Handler
	steps []func(slog.Handler) slog.Handler
}

func (c *handler) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }

func (c *handler) Handle(ctx context.Context, r slog.Record) error {
	ids := attrs(ctx)
	if len(ids) == 0 {
		return c.h.Handle(ctx, r)
	}
	if c.root == nil {
		r.AddAttrs(ids...)
		return c.h.Handle(ctx, r)
	}
	h := c.root.WithAttrs(ids)
	for _, step := range c.steps {
		h = step(h)
	}
	return h.Handle(ctx, r)
}

func (c *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return c
	}
	out := &handler{h: c.h.WithAttrs(as), root: c.root}
	if c.root != nil {
		out.steps = append(c.steps[:len(c.steps):len(c.steps)], func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })
	}
	return out
}

func (c *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return c
	}
	out := &handler{h: c.h.WithGroup(name), root: c.root, steps: c.steps[:len(c.steps):len(c.steps)]}
	if out.root == nil {
		out.root = c.h
	}
	out.steps = append(out.steps, func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
	return out
}

// attrs are the ids ctx carries, as log attributes.
func attrs(ctx context.Context) []slog.Attr {
	if ctx == nil {
		return nil
	}
	var out []slog.Attr
	if id := RequestID(ctx); id != "" {
		out = append(out, slog.String(RequestIDAttr, id))
	}
	if id := CorrelationID(ctx); id != "" {
		out = append(out, slog.String(CorrelationIDAttr, id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		out = append(out, slog.String(TraceIDAttr, sc.TraceID().String()), slog.String(SpanIDAttr, sc.SpanID().String()))
	}
	return out
}
