package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

// CodeMailer mails verification codes (doc/mail.md): it renders the scene's
// mail and sends it through the configured mailer, once per code however
// often its message comes (SentOnce). A message older than the code's TTL
// is dropped with a log line: its code can no longer be used. A mailer's
// permanent refusal (a rejected address) goes to the DLQ; anything else is
// retried (10 s × 3, the contract's policy: doc/contract.md).
type CodeMailer struct {
	mailer mail.Mailer
	once   SentOnce
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time
}

// SentOnce sends a mail at most once per key (store.SentMails): a call
// that meets another sending the same key gets store.ErrMailSending.
type SentOnce interface {
	SendOnce(ctx context.Context, key string, send func(context.Context) error) (sent bool, err error)
}

// NewCodeMailer returns the email consumer.
func NewCodeMailer(m mail.Mailer, once SentOnce, log *slog.Logger) *CodeMailer {
	if m == nil || once == nil || log == nil {
		panic("handlers: NewCodeMailer: nil dependency")
	}
	return &CodeMailer{mailer: m, once: once, ttl: keys.VerifyCodeTTL, log: log, now: time.Now}
}

func emailCodeConsumer(d Backends, log *slog.Logger) *CodeMailer {
	return NewCodeMailer(d.Mailer, store.NewSentMails(d.Redis), log)
}

// Handle mails m's code, unless it expired or was mailed before.
func (h *CodeMailer) Handle(ctx context.Context, m topology.EmailCodeDispatch) error {
	age := h.now().Sub(time.Unix(m.CreatedAtEpochSeconds, 0))
	if age > h.ttl {
		h.log.WarnContext(ctx, "email code dropped: older than the code's TTL", "scene", m.Scene, "age", age.Round(time.Second), "ttl", h.ttl)
		return nil
	}
	content, err := mail.RenderCode(mail.Code{Scene: m.Scene, Code: m.Code, Email: m.Email, TTL: h.ttl})
	if err != nil {
		return messaging.Permanent(err)
	}
	key := codeDispatchKey(m)
	send := func(ctx context.Context) error {
		return inSpan(ctx, "mail send", func(ctx context.Context) error {
			return h.mailer.Send(ctx, content.Message(m.Email, key))
		})
	}
	sent, err := h.once.SendOnce(ctx, key, send)
	switch {
	case errors.Is(err, mail.ErrPermanent):
		return messaging.Permanent(err)
	case err != nil:
		return fmt.Errorf("mail %s code: %w", m.Scene, err) // retried: ErrMailSending finds it sent then
	case sent:
		h.log.InfoContext(ctx, "email code sent", "scene", m.Scene)
	default:
		h.log.InfoContext(ctx, "email code sent before: not again", "scene", m.Scene)
	}
	return nil
}

// codeDispatchKey names one code's mail for the mailer's idempotency: the
// same for every delivery of the message, different for each code.
func codeDispatchKey(m topology.EmailCodeDispatch) string {
	sum := sha256.Sum256([]byte(m.Scene + "\x00" + m.Email + "\x00" + m.Code + "\x00" + strconv.FormatInt(m.CreatedAtEpochSeconds, 10)))
	return "code-" + hex.EncodeToString(sum[:16])
}
