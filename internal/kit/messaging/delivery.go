package messaging

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	"github.com/eisland/isle/internal/kit/correlation"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Delivery is one message as a handler sees it.
type Delivery struct {
	MessageID   string            // AMQP message_id, or "sha256:" and a hash of the body when the producer set none
	TraceID     string            // x-trace-id header or correlation_id
	TypeID      string            // __TypeId__
	Queue       string            // the queue it was consumed from
	RoutingKey  string            // the routing key it was published with
	Body        []byte            // the JSON body, untouched
	Headers     map[string]string // every AMQP header, rendered as text
	HeadersJSON string            // the headers as JSON, types kept where JSON has them (DLQ routes only)
	Retry       int               // the domain's retry header, parsed defensively
	Priority    uint8
	Redelivered bool // the broker's flag: it was delivered before, and may have been handled
	// IsleID is the id RetryMiddleware gave a delivery of a main queue
	// whose producer set no id: MessageID, ":" and 16 hex digits of its
	// own. Two messages with equal bodies are two messages, so each
	// delivery is keyed by it (Key), and the copies the middleware makes of
	// it (retry, DLQ) carry it as their message_id: handling a copy is keyed
	// as handling the first delivery was. "" when the producer set an id.
	IsleID string

	idless bool // the producer set no id: MessageID is the body's hash

	table amqp.Table // the headers as they came
}

// deliveryOf is a delivery of queue as handlers see it. A delivery without
// a message_id gets one derived from its body (or a watermill producer's
// uuid header), stable across redeliveries; on a main queue RetryMiddleware
// then gives it an id of its own (IsleID).
func deliveryOf(d amqp.Delivery, queue string) Delivery {
	dl := Delivery{
		MessageID:   d.MessageId,
		Queue:       queue,
		RoutingKey:  d.RoutingKey,
		Body:        d.Body,
		Headers:     make(map[string]string, len(d.Headers)),
		Priority:    d.Priority,
		Redelivered: d.Redelivered,
		table:       d.Headers,
	}
	for k, v := range d.Headers {
		dl.Headers[k] = headerString(v)
	}
	dl.TypeID = dl.Headers[HeaderTypeID]
	dl.TraceID = cmp.Or(dl.Headers[HeaderTraceID], d.CorrelationId)
	if dl.MessageID == "" {
		if h := dl.Headers["_watermill_message_uuid"]; h != "" {
			dl.MessageID = h
		} else {
			sum := sha256.Sum256(d.Body)
			dl.MessageID, dl.idless = "sha256:"+hex.EncodeToString(sum[:16]), true
		}
	}
	return dl
}

// assignID gives a delivery whose producer set no id an id of its own
// (IsleID).
func (d *Delivery) assignID() {
	if !d.idless || d.IsleID != "" {
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	d.IsleID = d.MessageID + ":" + hex.EncodeToString(b[:])
}

// Key is the delivery's idempotency key: the message's id, or for a
// message without one the id RetryMiddleware gave this delivery (IsleID).
// A key assigned so names one delivery: a redelivery of the same message
// gets another (the broker flags it Redelivered), and SameBody is the
// prefix every key of a message with its body shares.
func (d Delivery) Key() string { return cmp.Or(d.IsleID, d.MessageID) }

// SameBody is, for a delivery keyed by an id RetryMiddleware gave it, what
// the keys of every delivery of a message with the same body begin with
// (MessageID, the body's hash); "" otherwise.
func (d Delivery) SameBody() string {
	if d.IsleID == "" {
		return ""
	}
	return d.MessageID
}

// withBrokerReason gives a message the broker dead-lettered itself (a
// quorum queue's delivery limit: x-first-death-reason "delivery_limit") a
// dead reason (HeaderDeadReason) when it has none of Isle's: "broker: ", the
// broker's reason and the queue it died in. The header maps are copied
// first: the subscriber shares them with the message.
func (d *Delivery) withBrokerReason() {
	reason := d.Headers["x-first-death-reason"]
	if reason == "" || d.Headers[HeaderDeadReason] != "" {
		return
	}
	text := "broker: " + reason
	if q := d.Headers["x-first-death-queue"]; q != "" {
		text += " (queue " + q + ")"
	}
	d.Headers = maps.Clone(d.Headers)
	d.Headers[HeaderDeadReason] = text
	d.table = maps.Clone(d.table)
	if d.table == nil {
		d.table = amqp.Table{}
	}
	d.table[HeaderDeadReason] = text
}

// headersJSON is the delivery's headers as JSON, AMQP types kept where JSON
// has them ("{}" for none): what a DLQ table keeps.
func (d Delivery) headersJSON() string {
	if len(d.table) == 0 {
		return "{}"
	}
	raw, err := json.Marshal(jsonable(d.table))
	if err != nil {
		return "{}"
	}
	return string(raw)
}

// copyHeaders returns the headers a copy of d starts from: all of them. The
// ones a copy must not carry (death headers, watermill's) are dropped by the
// Marshaler, which sees every publish, not only copies.
func (d Delivery) copyHeaders() map[string]string {
	return maps.Clone(d.Headers)
}

// inflight is what the context of a message handed out carries, as one
// value, while the middleware and its handler hold it: the Delivery, which
// the middleware complete in place (Retry, IsleID, HeadersJSON) rather than
// put a copy in a new context each, and the AMQP delivery it came as. The
// middleware of one message run on one goroutine, and change the Delivery
// only before its handler runs, so it needs no lock. Nothing flows back
// through it: the middleware that decides a delivery's outcome returns it
// (verdict).
type inflight struct {
	d      Delivery
	raw    amqp.Delivery // as it came from the broker, when hasRaw
	hasRaw bool
}

type inflightKey struct{}

// withInflight returns ctx carrying in.
func withInflight(ctx context.Context, in *inflight) context.Context {
	return context.WithValue(ctx, inflightKey{}, in)
}

// inflightOf is what ctx carries, or nil.
func inflightOf(ctx context.Context) *inflight {
	in, _ := ctx.Value(inflightKey{}).(*inflight)
	return in
}

// withDelivery returns ctx carrying in, and in's trace id (x-trace-id) as
// the correlation id of the logger (correlation.WithCorrelationID): each
// line logged with ctx carries it.
func withDelivery(ctx context.Context, in *inflight) context.Context {
	return correlation.WithCorrelationID(withInflight(ctx, in), in.d.TraceID)
}

// WithDelivery returns ctx carrying d, as the middleware hand a delivery to
// a handler: for tests and tools that call a handler directly.
func WithDelivery(ctx context.Context, d Delivery) context.Context {
	return withDelivery(ctx, &inflight{d: d})
}

// DeliveryFrom returns the delivery a handler's context belongs to.
func DeliveryFrom(ctx context.Context) (Delivery, bool) {
	if in := inflightOf(ctx); in != nil {
		return in.d, true
	}
	return Delivery{}, false
}
