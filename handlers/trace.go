package handlers

import (
	"context"

	"github.com/eisland/isle/internal/kit/tracing"
	"go.opentelemetry.io/otel/trace"
)

// inSpan runs fn in a client span called name, a child of the message's
// consumer span: the work a handler hands to something outside Isle, a
// mail sent or an object copied (doc/tracing.md). fn's error marks it.
func inSpan(ctx context.Context, name string, fn func(context.Context) error) error {
	ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	err := fn(ctx)
	tracing.End(span, err)
	return err
}
