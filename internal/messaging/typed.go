package messaging

import (
	"context"
	"fmt"

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

// Item is one delivery of a batch with its decoded record.
type Item[T any] struct {
	Delivery Delivery
	Msg      T
}

// TypedBatch adapts a handler of a batch of one record type, as Typed does
// one: each body is decoded and validated as the contract says, a body that
// fails goes to the DLQ at once, and h gets the others, whose answers it
// returns in order.
func TypedBatch[T any, PT interface {
	*T
	topology.Message
}](h func(ctx context.Context, items []Item[T]) []error) BatchHandlerFunc {
	return func(ctx context.Context, ds []Delivery) []error {
		errs := make([]error, len(ds))
		items := make([]Item[T], 0, len(ds))
		at := make([]int, 0, len(ds)) // items[j] is ds[at[j]]
		for i, d := range ds {
			m, err := topology.Decode[T, PT](d.Body)
			if err != nil {
				errs[i] = Permanent(err)
				continue
			}
			items = append(items, Item[T]{Delivery: d, Msg: m})
			at = append(at, i)
		}
		if len(items) == 0 {
			return errs
		}
		answers := h(ctx, items)
		if len(answers) != len(items) {
			panic(fmt.Sprintf("messaging: a batch handler answered %d of %d items", len(answers), len(items))) // recovered by the flow
		}
		for j, err := range answers {
			errs[at[j]] = err
		}
		return errs
	}
}
