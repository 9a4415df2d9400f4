package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Enqueued says what EnqueueMessage wrote.
type Enqueued struct {
	MessageID string // the message id it is published with
	Added     bool   // false: a row with this message id was there already
}

// EnqueueMessage writes m into the outbox inside tx, for the relay to
// publish after the commit to domain d (its exchange and routing key, with
// the prefix the relay runs with) with d's __TypeId__. key names the
// message for good (e.g. "identity-material:" and the certification id):
// its message id is derived from it, so writing the same key again adds
// nothing and a consumer sees one message id however often it is relayed.
func EnqueueMessage(tx *gorm.DB, d topology.Domain, m topology.Message, key, traceID string, priority uint8) (Enqueued, error) {
	body, err := topology.Encode(m)
	if err != nil {
		return Enqueued{}, err
	}
	id := uuid.NewSHA1(outboxIDSpace, []byte(key)).String()
	row := OutboxMessage{MessageID: id, Domain: d.Name, MessageType: d.TypeID, Payload: body, Headers: traceHeaders(tx.Statement.Context),
		Priority: priority, TraceID: traceID}
	res := tx.Omit("id", "created_at", "available_at").
		Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return Enqueued{}, fmt.Errorf("store: enqueue %s %s: %w", d.Name, key, res.Error)
	}
	// MySQL counts a row an INSERT ... ON DUPLICATE KEY UPDATE left as it
	// was as 0 rows affected, one it inserted as 1.
	return Enqueued{MessageID: id, Added: res.RowsAffected == 1}, nil
}

// OutboxEntry is one message to write to the outbox: as EnqueueMessage's
// arguments.
type OutboxEntry struct {
	Domain   topology.Domain
	Msg      topology.Message
	Key      string
	TraceID  string
	Priority uint8
}

// Enqueue writes entries to the outbox in one transaction, in their order,
// for the relay to publish (EnqueueMessage: an entry whose key was written
// before adds nothing). The rows carry the trace of ctx.
func Enqueue(ctx context.Context, db *gorm.DB, entries []OutboxEntry) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, e := range entries {
			if _, err := EnqueueMessage(tx, e.Domain, e.Msg, e.Key, e.TraceID, e.Priority); err != nil {
				return err
			}
		}
		return nil
	})
}

// traceHeaders is the outbox row's headers: the trace context of the span
// ctx carries (traceparent, tracestate), as a JSON object, so that the
// relay's publish continues the trace of the transaction that wrote the
// row; "{}" when ctx carries none.
func traceHeaders(ctx context.Context) string {
	if ctx == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return "{}"
	}
	h := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, h)
	b, err := json.Marshal(h)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// outboxIDSpace is the UUID namespace of outbox message ids.
var outboxIDSpace = uuid.MustParse("0d5d8a4e-4f5b-4c1e-9f59-6a2f3c1b7e21")
