package messaging

import (
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ContentType is the content type of every message Isle publishes; Spring's
// Jackson converter only decodes bodies whose type says json.
const ContentType = "application/json"

// Marshaler maps watermill messages to AMQP publishings: metadata becomes
// string headers, except the _amqp.* keys, which set properties, and the
// headers no copy may carry (the broker's death headers, watermill's own),
// which are dropped here for every publish. The integer headers (the
// domains' retry counts) are sent as int32 as a Spring producer sends them.
// Every message is persistent, application/json, with the watermill UUID as
// message_id. (Consuming builds a Delivery from the AMQP delivery itself:
// deliveryOf.)
type Marshaler struct {
	// IntHeaders are sent as int32 when their value is numeric.
	IntHeaders map[string]bool
}

// Marshal returns the publishing of msg.
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
