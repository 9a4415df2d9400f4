package messaging

import (
	"context"

	"github.com/eisland/isle/topology"
)

// Typed adapts a handler of one record: the body is decoded and validated
// as the contract says (topology.Decode), a body that fails goes to the DLQ
// at once, and h gets the record. The Delivery is in ctx (DeliveryFrom) for
// handlers that need the message id or trace id.
func Typed[T any, PT interface {
	*T
	topology.Message
}](h func(ctx context.Context, m T) error) HandlerFunc {
	return func(ctx context.Context, d Delivery) error {
		m, err := topology.Decode[T, PT](d.Body)
		if err != nil {
			return Permanent(err)
		}
		return h(ctx, m)
	}
}

// Options are the optional properties of Publish.
type Options struct {
	MessageID string // "" = a new UUID
	TraceID   string
	Priority  uint8
}

// Publish encodes m (validating it) and sends it to its domain's main
// routing key with the record's __TypeId__, waiting for the confirm.
func (p *Publisher) Publish(ctx context.Context, m topology.Message, o Options) error {
	d, ok := p.tp.DomainOf(m)
	if !ok {
		return errUnknownRecord(m)
	}
	body, err := topology.Encode(m)
	if err != nil {
		return err
	}
	return p.Send(ctx, Outgoing{
		RoutingKey: d.RoutingKey, Body: body, MessageID: o.MessageID, TypeID: d.TypeID, TraceID: o.TraceID, Priority: o.Priority,
	})
}
