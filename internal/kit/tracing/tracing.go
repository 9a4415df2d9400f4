// Package tracing sets up OpenTelemetry for a binary and carries W3C trace
// context (traceparent, tracestate) through what Isle does: into and out
// of HTTP requests, AMQP headers, and the log lines written inside a span
// (doc/tracing.md). It imports no other Isle package.
package tracing

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of Isle's own spans.
const Name = "github.com/eisland/isle"

// Tracer is Isle's tracer on the global provider: until Setup installs
// one, its spans are not recorded, and a span context that came in (a
// traceparent header) is passed on unchanged. It is made once: the global
// provider hands a tracer made before Setup on to the provider Setup
// installs.
func Tracer() trace.Tracer { return tracer }

var tracer = otel.Tracer(Name)

// Config says where spans go. The OpenTelemetry SDK reads the standard
// OTEL_* variables itself (the exporter's endpoint, headers and timeout,
// OTEL_TRACES_SAMPLER and its argument, OTEL_RESOURCE_ATTRIBUTES); the
// configuration loader reads the ones that decide whether anything is
// exported, so that they are documented and checked with the rest.
type Config struct {
	// Export: an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and OTEL_TRACES_EXPORTER is not
	// "none". Otherwise spans are neither recorded nor exported.
	Export bool
	// Service is the service.name of the binary's spans (OTEL_SERVICE_NAME,
	// or "isle-" and the binary's name).
	Service string
}

// Setup installs the W3C propagator and, when cfg.Export, a tracer
// provider that samples as OTEL_TRACES_SAMPLER says (parent-based, always
// on, by default) and exports in batches over OTLP/HTTP. The returned
// function flushes what is buffered and stops the exporter; it is a no-op
// when nothing is exported.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator())
	if !cfg.Export {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	tp, err := NewProvider(ctx, cfg.Service, sdktrace.WithBatcher(exp))
	if err != nil {
		return nil, errors.Join(err, exp.Shutdown(ctx))
	}
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// NewProvider is a tracer provider for service with the resource of
// OTEL_RESOURCE_ATTRIBUTES and the SDK's own, and opts (its exporter).
func NewProvider(ctx context.Context, service string, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, error) {
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithResource(res)}, opts...)...), nil
}

// Propagator carries trace context as W3C traceparent and tracestate, and
// baggage: what Micrometer Tracing, on the Spring side of the broker,
// writes and reads by default.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// End ends span, marked failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// IDs returns the trace and span id of the span ctx carries, or "" when it
// carries none (for log lines).
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}
