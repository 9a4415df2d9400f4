package messaging

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ContentType is the content type of every message Isle publishes; Spring's
// Jackson converter only decodes bodies whose type says json.
const ContentType = "application/json"

// Marshaler maps watermill messages to AMQP publishings and back.
//
// Publishing: metadata becomes string headers, except the _amqp.* keys,
// which set properties, and the headers no copy may carry (the broker's death
// headers, watermill's own), which are dropped here for every publish. The
// integer headers (the domains' retry counts) are sent as int32 as a Spring
// producer sends them. Every message is persistent, application/json, with
// the watermill UUID as message_id.
//
// Consuming accepts every real delivery: every header, whatever its AMQP
// type, is rendered as text into the metadata, and the original table is
// kept as JSON for the DLQ tables. A delivery without a message_id gets one
// derived from its body, so it is stable across redeliveries. The one
// refusal is ErrPhantomDelivery (see there).
type Marshaler struct {
	// IntHeaders are sent as int32 when their value is numeric.
	IntHeaders map[string]bool
}

// Marshal implements the watermill-amqp Marshaler.
func (m Marshaler) Marshal(msg *message.Message) (amqp.Publishing, error) {
	headers := make(amqp.Table, len(msg.Metadata))
	for k, v := range msg.Metadata {
		if strings.HasPrefix(k, metaPrefix) || deathHeader(k) || watermillHeader(k) {
			continue
		}
		if m.IntHeaders[k] {
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				headers[k] = int32(n)
				continue
			}
		}
		headers[k] = v
	}
	p := amqp.Publishing{
		Headers:       headers,
		ContentType:   ContentType,
		DeliveryMode:  amqp.Persistent,
		MessageId:     msg.UUID,
		Timestamp:     time.Now().UTC().Truncate(time.Second),
		CorrelationId: msg.Metadata.Get(metaCorrelation),
		AppId:         "isle",
		Body:          msg.Payload,
	}
	// Sent as it is: the replication queue has priorities 0–10 (doc/contract.md,
	// x-max-priority 10), and a broker treats anything above a queue's
	// maximum as the maximum.
	if pr, err := strconv.ParseUint(msg.Metadata.Get(metaPriority), 10, 8); err == nil {
		p.Priority = uint8(pr)
	}
	return p, nil
}

// ErrPhantomDelivery is Unmarshal's answer to a zero amqp.Delivery: the
// value a consumer reads from its closed delivery channel when the broker
// cancelled it (queue deleted, quorum leader change) or its channel closed.
// watermill-amqp v3.0.2 unmarshals whatever it reads; refusing here keeps
// the phantom from every handler. watermill-amqp then fails to nack it (it
// has no channel to nack on), stops that subscription and subscribes again,
// every 100 ms until the queue is back; no real delivery is touched.
var ErrPhantomDelivery = errors.New("messaging: not a delivery (the broker cancelled the consumer or its channel closed)")

// Unmarshal implements the watermill-amqp Marshaler. It fails only with
// ErrPhantomDelivery: a real delivery always has its channel as Acknowledger.
func (m Marshaler) Unmarshal(d amqp.Delivery) (*message.Message, error) {
	if d.Acknowledger == nil {
		return nil, ErrPhantomDelivery
	}
	id := d.MessageId
	if id == "" {
		if h, ok := d.Headers["_watermill_message_uuid"].(string); ok && h != "" {
			id = h
		} else {
			sum := sha256.Sum256(d.Body)
			id = "sha256:" + hex.EncodeToString(sum[:16])
		}
	}
	msg := message.NewMessage(id, d.Body)
	for k, v := range d.Headers {
		msg.Metadata.Set(k, headerString(v))
	}
	if raw, err := json.Marshal(jsonable(d.Headers)); err == nil {
		msg.Metadata.Set(metaHeadersJSON, string(raw))
	}
	msg.Metadata.Set(metaRoutingKey, d.RoutingKey)
	msg.Metadata.Set(metaPriority, strconv.Itoa(int(d.Priority)))
	if d.CorrelationId != "" {
		msg.Metadata.Set(metaCorrelation, d.CorrelationId)
	}
	return msg, nil
}
