package messaging

import (
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/correlation"
)

// CorrelationMiddleware puts the delivery's trace id (Delivery.TraceID, the
// x-trace-id header) in the message's context as its correlation id
// (correlation.WithCorrelationID), so that every line the handler and the
// middleware inside log with that context carries it.
func CorrelationMiddleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		// Isle's Subscriber put it there with the Delivery (withDelivery):
		// only a message from elsewhere needs it read again.
		if correlation.CorrelationID(msg.Context()) == "" {
			id := inflightIn(msg).d.TraceID
			msg.SetContext(correlation.WithCorrelationID(msg.Context(), id))
		}
		return h(msg)
	}
}
