package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// unpublishable is the error of a row that no retry can publish as it is
// (its domain, its headers, its object): the row is parked, not backed off.
type unpublishable struct{ err error }

func (e unpublishable) Error() string { return e.err.Error() }
func (e unpublishable) Unwrap() error { return e.err }

func cannotPublish(err error) error { return unpublishable{err} }

// table is how the relay reads and publishes the rows of one outbox table.
type table struct {
	name string
	// claim claims up to limit rows due now for claim, leased for lease,
	// and reads them as items.
	claim func(ctx context.Context, o *store.Outbox, claim string, limit int, lease time.Duration) ([]*item, error)
	// prepare, if set, runs after the claim's commit and before the
	// publishes; it sets the error of the items it cannot prepare.
	prepare func(ctx context.Context, o *store.Outbox, items []*item) error
}

func newTable(name string, tp *topology.Topology) (table, error) {
	switch name {
	case "outbox":
		return table{name: name, claim: func(ctx context.Context, o *store.Outbox, claim string, limit int, lease time.Duration) ([]*item, error) {
			return claimOutbox(ctx, o, tp, claim, limit, lease)
		}}, nil
	case "object_outbox":
		d, ok := tp.Domain(topology.DomainObjectReplication)
		if !ok {
			return table{}, errors.New("relay: the topology has no object replication domain")
		}
		o := objects{domain: d}
		return table{name: name, claim: o.claim, prepare: o.prepare}, nil
	}
	return table{}, fmt.Errorf("relay: no publisher for outbox table %s", name)
}

// claimOutbox claims outbox rows: each is published as it is, to the
// routing key of its domain.
func claimOutbox(ctx context.Context, o *store.Outbox, tp *topology.Topology, claim string, limit int, lease time.Duration) ([]*item, error) {
	rows, err := o.ClaimMessages(ctx, claim, limit, lease)
	if err != nil {
		return nil, err
	}
	items := make([]*item, len(rows))
	for i, row := range rows {
		it := &item{id: row.ID, attempts: row.Attempts}
		it.out, it.err = outgoing(tp, row)
		items[i] = it
	}
	return items, nil
}

// outgoing is the message of an outbox row: its payload, message id,
// headers, priority and trace id, and its message type as __TypeId__
// (the domain's when empty).
func outgoing(tp *topology.Topology, row store.OutboxMessage) (messaging.Outgoing, error) {
	d, ok := tp.Domain(row.Domain)
	if !ok {
		return messaging.Outgoing{}, cannotPublish(fmt.Errorf("relay: outbox %d: no topology domain %q", row.ID, row.Domain))
	}
	headers, err := decodeHeaders(row.Headers)
	if err != nil {
		return messaging.Outgoing{}, cannotPublish(fmt.Errorf("relay: outbox %d: headers: %w", row.ID, err))
	}
	typeID := row.MessageType
	if typeID == "" {
		typeID = d.TypeID
	}
	return messaging.Outgoing{
		RoutingKey: d.RoutingKey, Body: row.Payload, MessageID: row.MessageID, TypeID: typeID,
		TraceID: row.TraceID, Priority: row.Priority, Headers: headers,
	}, nil
}

// decodeHeaders reads a JSON object of headers: strings as they are, other
// values as their JSON text (a number as written).
func decodeHeaders(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = strconv.FormatBool(v)
		case nil:
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			out[k] = string(b)
		}
	}
	return out, nil
}

// objects publishes object_outbox rows: the relay creates each row's
// replication task and publishes the task's ObjectReplicationMessage.
type objects struct{ domain topology.Domain }

// taskSource is what an object_outbox row's replication task is made of:
// the claimed row and its headers, decoded.
type taskSource struct {
	*store.ClaimedObject
	headers map[string]string // the trace context of the upload that queued it
}

func (o objects) claim(ctx context.Context, out *store.Outbox, claim string, limit int, lease time.Duration) ([]*item, error) {
	rows, err := out.ClaimObjects(ctx, claim, limit, lease)
	if err != nil {
		return nil, err
	}
	items := make([]*item, len(rows))
	for i := range rows {
		row := &rows[i]
		items[i] = &item{id: row.ID, attempts: row.Attempts, task: &taskSource{ClaimedObject: row}}
		if row.SourceURL == nil || row.SHA256 == nil {
			items[i].err = cannotPublish(fmt.Errorf("relay: object_outbox %d: object %d does not exist", row.ID, row.ObjectID))
		} else if items[i].task.headers, err = decodeHeaders(row.Headers); err != nil {
			items[i].err = cannotPublish(fmt.Errorf("relay: object_outbox %d: headers: %w", row.ID, err))
		}
	}
	return items, nil
}

// prepare creates the replication task of each row, or finds the one a
// former claim of the row created, and makes the task's message.
func (o objects) prepare(ctx context.Context, out *store.Outbox, items []*item) error {
	var tasks []store.NewTask
	for _, it := range items {
		if it.err == nil {
			s := it.task
			tasks = append(tasks, store.NewTask{OutboxID: it.id, ObjectID: s.ObjectID, SourceURL: *s.SourceURL,
				Priority: s.Priority, SHA256: *s.SHA256, TraceID: s.TraceID})
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	byOutbox, err := out.CreateTasks(ctx, tasks)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	for _, it := range items {
		if it.err != nil {
			continue
		}
		task, ok := byOutbox[it.id]
		if !ok {
			it.err = fmt.Errorf("relay: object_outbox %d: replication task not found after insert", it.id)
			continue
		}
		it.out, it.err = o.message(it, task)
	}
	return nil
}

func (o objects) message(it *item, task uint64) (messaging.Outgoing, error) {
	id := int64(task)
	body, err := topology.Encode(topology.ObjectReplication{TaskID: &id, TraceID: it.task.TraceID})
	if err != nil {
		return messaging.Outgoing{}, cannotPublish(err)
	}
	return messaging.Outgoing{
		RoutingKey: o.domain.RoutingKey, Body: body, TypeID: o.domain.TypeID, TraceID: it.task.TraceID, Headers: it.task.headers,
		MessageID: store.ReplicationMessageID(task), // the backfill republishes with the same id
		Priority:  min(it.task.Priority, uint8(o.domain.MaxPriority)),
	}, nil
}
