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
	out, err := p.outgoing(Publication{m, o})
	if err != nil {
		return err
	}
	return p.Send(ctx, out)
}

// Publication is one record to publish, with its options.
type Publication struct {
	Msg topology.Message
	Options
}

// PublishAll publishes each record as Publish does, all of them before any
// confirm is awaited (SendAll), and returns each one's outcome, in order.
func (p *Publisher) PublishAll(ctx context.Context, ps []Publication) []error {
	errs := make([]error, len(ps))
	outs := make([]Outgoing, 0, len(ps))
	at := make([]int, 0, len(ps))
	for i, pub := range ps {
		out, err := p.outgoing(pub)
		if err != nil {
			errs[i] = err
			continue
		}
		outs = append(outs, out)
		at = append(at, i)
	}
	for k, err := range p.SendAll(ctx, outs) {
		errs[at[k]] = err
	}
	return errs
}

// outgoing encodes pub's record (validating it) for its domain's main
// routing key.
func (p *Publisher) outgoing(pub Publication) (Outgoing, error) {
	d, ok := p.tp.DomainOf(pub.Msg)
	if !ok {
		return Outgoing{}, errUnknownRecord(pub.Msg)
	}
	body, err := topology.Encode(pub.Msg)
	if err != nil {
		return Outgoing{}, err
	}
	o := pub.Options
	return Outgoing{RoutingKey: d.RoutingKey, Body: body, MessageID: o.MessageID, TypeID: d.TypeID, TraceID: o.TraceID, Priority: o.Priority}, nil
}
