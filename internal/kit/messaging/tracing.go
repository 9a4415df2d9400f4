package messaging

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Trace context travels in the AMQP headers traceparent and tracestate
// (W3C, what Micrometer Tracing writes on the Spring side): the publisher
// writes the publishing span's, TracingMiddleware continues it
// (doc/tracing.md).

// startPublishSpan starts the producer span of a publish to routingKey and
// writes its context into msg's metadata, which become the message's
// headers. Without a span to continue and nothing recorded (no tracer
// provider), nothing is written, and a copy keeps the traceparent it has.
func startPublishSpan(ctx context.Context, exchange, routingKey string, msg *message.Message) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, routingKey+" publish", trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemRabbitMQ, semconv.MessagingOperationTypeSend,
			semconv.MessagingDestinationName(exchange), semconv.MessagingRabbitMQDestinationRoutingKey(routingKey),
			semconv.MessagingMessageID(msg.UUID))
	}
	if span.SpanContext().IsValid() {
		otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(msg.Metadata))
	}
	return ctx, span
}

// TracingMiddleware handles each message of queue in a consumer span that
// continues the trace its traceparent header carries (an Isle publisher's
// or a Spring producer's), so everything the handler does, what it
// publishes and the lines it logs (correlation.Handler) belong to that
// trace. A handler's error marks the span failed.
func TracingMiddleware(queue string) message.HandlerMiddleware {
	name := queue + " process"
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := otel.GetTextMapPropagator().Extract(msg.Context(), propagation.MapCarrier(msg.Metadata))
			ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer))
			if span.IsRecording() {
				span.SetAttributes(semconv.MessagingSystemRabbitMQ, semconv.MessagingOperationTypeProcess,
					semconv.MessagingDestinationName(queue), semconv.MessagingMessageID(msg.UUID))
			}
			msg.SetContext(ctx)
			out, err := h(msg)
			tracing.End(span, err)
			return out, err
		}
	}
}
