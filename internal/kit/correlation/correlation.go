// Package correlation carries the ids that tie a log line to what caused
// it: the id of the HTTP request being served, the correlation id of the
// message being handled (the id of the request that caused it, sent as
// x-trace-id), and the OpenTelemetry trace and span the work runs in.
// Whoever starts the work puts its id in the context (httpapi for a
// request, messaging for a delivery, a span for a trace); Handler adds the
// ids to every line logged with that context, so no log call names them by
// hand. It imports no other Isle package, so any package may use it.
package correlation

import "context"

// The names of the ids in log lines.
const (
	RequestIDAttr     = "request_id"
	CorrelationIDAttr = "correlation_id"
	TraceIDAttr       = "trace_id" // OpenTelemetry's, of the span the line is logged in
	SpanIDAttr        = "span_id"
)

type (
	requestIDKey     struct{}
	correlationIDKey struct{}
)

// WithRequestID returns ctx carrying the id of the HTTP request it serves.
// An empty id leaves ctx as it is.
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the id of the HTTP request ctx serves, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithCorrelationID returns ctx carrying the correlation id of the message
// it handles. An empty id leaves ctx as it is.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, correlationIDKey{}, id)
}

// CorrelationID is the correlation id of the message ctx handles, or "".
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(correlationIDKey{}).(string)
	return id
}
