package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// subjectField names the body field that identifies what a dead message was
// about, shown by `islectl dlq list` and searchable in the table.
var subjectField = map[string]string{
	topology.DomainEmail:             "email",
	topology.DomainPaymentNotify:     "outTradeNo",
	topology.DomainPaymentReceipt:    "outTradeNo",
	topology.DomainAgentBilling:      "username",
	topology.DomainObjectReplication: "taskId",
	topology.DomainIdentityMaterial:  "certifyId",
	topology.DomainMiniGameScore:     "submitId",
}

// DeadLetters persists what reaches a domain's DLQ to its MySQL table (SPEC 2):
// the raw body, headers, retry count, last error, queue and time. A
// redelivered dead message is stored once.
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

// Handle stores one dead message.
func (h *DeadLetters) Handle(ctx context.Context, d messaging.Delivery) error {
	replay := messaging.ParseRetry(d.Headers[messaging.HeaderReplay])
	dl := &store.DeadLetter{
		DedupKey:    store.DeadLetterKey(d.Queue, d.MessageID, replay, d.Body),
		Queue:       d.Queue,
		RoutingKey:  d.RoutingKey,
		MessageType: d.TypeID,
		MessageID:   clip(d.MessageID, 128),
		TraceID:     clip(d.TraceID, 128),
		Subject:     clip(subject(d.Body, subjectField[h.domain.Name]), 255),
		Body:        d.Body,
		Headers:     cmp.Or(d.HeadersJSON, "{}"),
		RetryCount:  d.Retry,
		LastError:   lastError(d),
		DeadAt:      h.now().UTC(),
	}
	saved, err := store.SaveDeadLetter(ctx, h.db, h.domain.DLQTable, dl)
	if err != nil {
		return fmt.Errorf("store dead %s message %s: %w", h.domain.Name, d.MessageID, err)
	}
	if saved {
		h.log.WarnContext(ctx, "dead message stored", "domain", h.domain.Name, "table", h.domain.DLQTable,
			"id", dl.ID, "message_id", d.MessageID, "retry", d.Retry, "last_error", dl.LastError)
	} else {
		h.log.InfoContext(ctx, "dead message was stored before", "domain", h.domain.Name, "message_id", d.MessageID)
	}
	return nil
}

// lastError is the reason the message died: the header the retry flow sets,
// or the body's lastError field (a Spring producer's own DLQ copy).
func lastError(d messaging.Delivery) *string {
	s := d.Headers[messaging.HeaderLastError]
	if s == "" {
		var body struct {
			LastError string `json:"lastError"`
		}
		if json.Unmarshal(d.Body, &body) == nil {
			s = body.LastError
		}
	}
	if s == "" {
		return nil
	}
	return &s
}

// subject reads one field of a JSON object body as text ("" if absent).
func subject(body []byte, field string) string {
	if field == "" {
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	raw, ok := obj[field]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
