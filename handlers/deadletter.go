package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// DeadLetters persists what reaches a domain's DLQ to its MySQL table (doc/messaging.md, "Dead messages"):
// the raw body, headers, retry count, last error, queue and time, whole
// however large. A redelivered dead message is stored once.
type DeadLetters struct {
	db     *gorm.DB
	domain topology.Domain
	log    *slog.Logger
	now    func() time.Time
}

// NewDeadLetters returns the DLQ consumer of domain.
func NewDeadLetters(db *gorm.DB, domain topology.Domain, log *slog.Logger) *DeadLetters {
	if db == nil || log == nil || domain.DLQTable == "" {
		panic("handlers: NewDeadLetters: nil dependency or a domain without a DLQ")
	}
	return &DeadLetters{db: db, domain: domain, log: log, now: time.Now}
}

// Handle stores one dead message. A message the database cannot keep whole
// (store.ErrUnstorable) is a Permanent error: the dead-letter middleware
// (messaging.DeadLetterMiddleware) logs and counts it as failed, and the message stays in the DLQ; nothing damaged is stored.
func (h *DeadLetters) Handle(ctx context.Context, d messaging.Delivery) error {
	replay := messaging.ParseRetry(d.Headers[messaging.HeaderReplay])
	obj := jsonObject(d.Body)
	dl := &store.DeadLetter{
		DedupKey:    store.DeadLetterKey(d.Queue, d.MessageID, replay, d.Body),
		Queue:       d.Queue,
		RoutingKey:  d.RoutingKey,
		MessageType: d.TypeID,
		MessageID:   d.MessageID,
		TraceID:     d.TraceID,
		Subject:     subject(obj, h.domain.DLQSubject),
		Body:        d.Body,
		Headers:     cmp.Or(d.HeadersJSON, "{}"),
		RetryCount:  d.Retry,
		LastError:   lastError(d.Headers[messaging.HeaderLastError], obj),
		DeadAt:      h.now().UTC(),
	}
	saved, err := store.NewDeadLetters(h.db).Save(ctx, h.domain.DLQTable, dl)
	if errors.Is(err, store.ErrUnstorable) {
		return messaging.Permanent(fmt.Errorf("store dead %s message %s: %w", h.domain.Name, d.MessageID, err))
	}
	if err != nil {
		return fmt.Errorf("store dead %s message %s: %w", h.domain.Name, d.MessageID, err)
	}
	if saved {
		h.log.WarnContext(ctx, "dead message stored", "domain", h.domain.Name, "table", h.domain.DLQTable,
			"id", dl.ID, "message_id", d.MessageID, "retry", d.Retry, "bytes", len(d.Body), "last_error", dl.LastError)
	} else {
		h.log.InfoContext(ctx, "dead message was stored before", "domain", h.domain.Name, "message_id", d.MessageID)
	}
	return nil
}

// jsonObject decodes a body once for the fields Handle reads; a body that is
// not a JSON object yields nil, in which every field is absent.
func jsonObject(body []byte) map[string]json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	return obj
}

// lastError is the reason the message died: the header the retry middleware sets,
// or else the body's lastError field (a Spring producer's own DLQ copy).
func lastError(header string, body map[string]json.RawMessage) *string {
	s := header
	if s == "" {
		s = stringField(body, lastErrorField(body))
	}
	if s == "" {
		return nil
	}
	return &s
}

// lastErrorField names the body's lastError member, matched as encoding/json
// matches a struct field (exactly, else ignoring case), so that a producer
// spelling it LastError is still read.
func lastErrorField(body map[string]json.RawMessage) string {
	const name = "lastError"
	if _, ok := body[name]; ok {
		return name
	}
	for k := range body {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	return name
}

// stringField reads a JSON string member ("" if absent, null or not a string).
func stringField(obj map[string]json.RawMessage, field string) string {
	var s string
	if raw, ok := obj[field]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// subject reads one field of a JSON object body as text: a string as is,
// any other value as its JSON ("" if absent).
func subject(obj map[string]json.RawMessage, field string) string {
	raw, ok := obj[field]
	if field == "" || !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
