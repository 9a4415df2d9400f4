// Package correlation carries the ids that tie a log line to what caused
// it: the id of the HTTP request being served and the trace id of the
// message being handled. Whoever starts the work puts its id in the
// context (httpapi for a request, messaging for a delivery); Handler adds
// the ids to every line logged with that context, so no log call names
// them by hand. It imports no other Isle package, so any package may use
// it.
package correlation

import "context"

// The names of the ids in log lines.
const (
	RequestIDAttr = "request_id"
	TraceIDAttr   = "trace_id"
)

type (
	requestIDKey struct{}
	traceIDKey   struct{}
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

// WithTraceID returns ctx carrying the trace id of the message it handles.
// An empty id leaves ctx as it is.
func WithTraceID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, traceIDKey{}, id)
}

// TraceID is the trace id of the message ctx handles, or "".
func TraceID(ctx context.Context) string {
	id, _ := ctx.Value(traceIDKey{}).(string)
	return id
}
