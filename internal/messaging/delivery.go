package messaging

import (
	"context"
	"maps"
	"strconv"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/correlation"
	"github.com/eisland/isle/topology"
)

// Delivery is one message as a handler sees it.
type Delivery struct {
	MessageID   string            // AMQP message_id, or a hash of the body when the producer set none
	TraceID     string            // x-trace-id header or correlation_id
	TypeID      string            // __TypeId__
	Queue       string            // the queue it was consumed from
	RoutingKey  string            // the routing key it was published with
	Body        []byte            // the JSON body, untouched
	Headers     map[string]string // every AMQP header, rendered as text
	HeadersJSON string            // the headers as JSON, types kept where JSON has them
	Retry       int               // the domain's retry header, parsed defensively
	Priority    uint8
}

func newDelivery(msg *message.Message, d topology.Domain, queue string) Delivery {
	dl := Delivery{
		MessageID:   msg.UUID,
		TypeID:      msg.Metadata.Get(HeaderTypeID),
		Queue:       queue,
		RoutingKey:  msg.Metadata.Get(metaRoutingKey),
		Body:        msg.Payload,
		HeadersJSON: msg.Metadata.Get(metaHeadersJSON),
		Headers:     make(map[string]string, len(msg.Metadata)),
	}
	for k, v := range msg.Metadata {
		if !strings.HasPrefix(k, metaPrefix) {
			dl.Headers[k] = v
		}
	}
	dl.TraceID = dl.Headers[HeaderTraceID]
	if dl.TraceID == "" {
		dl.TraceID = msg.Metadata.Get(metaCorrelation)
	}
	if d.RetryHeader != "" {
		dl.Retry = ParseRetry(dl.Headers[d.RetryHeader])
	}
	if p, err := strconv.ParseUint(msg.Metadata.Get(metaPriority), 10, 8); err == nil {
		dl.Priority = uint8(p)
	}
	return dl
}

// copyHeaders returns the headers a copy of d starts from: all of them. The
// ones a copy must not carry (death headers, watermill's) are dropped by the
// Marshaler, which sees every publish, not only copies.
func (d Delivery) copyHeaders() map[string]string {
	return maps.Clone(d.Headers)
}

type deliveryKey struct{}

// withDelivery returns ctx carrying d, and d's trace id for the logger
// (correlation.WithTraceID): each line logged with ctx carries it.
func withDelivery(ctx context.Context, d Delivery) context.Context {
	return correlation.WithTraceID(context.WithValue(ctx, deliveryKey{}, d), d.TraceID)
}

// WithDelivery returns ctx carrying d, as the consumer hands a delivery to
// a handler: for tests and tools that call a handler directly.
func WithDelivery(ctx context.Context, d Delivery) context.Context { return withDelivery(ctx, d) }

// DeliveryFrom returns the delivery a handler's context belongs to.
func DeliveryFrom(ctx context.Context) (Delivery, bool) {
	d, ok := ctx.Value(deliveryKey{}).(Delivery)
	return d, ok
}
