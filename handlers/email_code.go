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

	"github.com/eisland/isle/internal/mail"
	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

// CodeMailer mails verification codes (doc/mail.md): it renders the scene's
// mail and sends it through the configured mailer. A message older than
// the code's TTL is dropped with a log line: its code can no longer be
// used. A mailer's permanent refusal (a rejected address) goes to the DLQ;
// anything else is retried (10 s × 3 by the seed).
type CodeMailer struct {
	mailer mail.Mailer
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time
}

// NewCodeMailer returns the email consumer.
func NewCodeMailer(m mail.Mailer, log *slog.Logger) *CodeMailer {
	if m == nil || log == nil {
		panic("handlers: NewCodeMailer: nil dependency")
	}
	return &CodeMailer{mailer: m, ttl: keys.VerifyCodeTTL, log: log, now: time.Now}
}

func emailCodeConsumer(d Deps, log *slog.Logger) messaging.HandlerFunc {
	return messaging.Typed(NewCodeMailer(d.Mailer, log).Handle)
}

// Handle mails m's code, unless it expired.
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
	send := func(ctx context.Context) error {
		return h.mailer.Send(ctx, content.Message(m.Email, codeDispatchKey(m)))
	}
	if err := inSpan(ctx, "mail send", send); err != nil {
		if errors.Is(err, mail.ErrPermanent) {
			return messaging.Permanent(err)
		}
		return fmt.Errorf("mail %s code: %w", m.Scene, err)
	}
	h.log.InfoContext(ctx, "email code sent", "scene", m.Scene)
	return nil
}

// codeDispatchKey names one code's mail for the mailer's idempotency: the
// same for every delivery of the message, different for each code.
func codeDispatchKey(m topology.EmailCodeDispatch) string {
	sum := sha256.Sum256([]byte(m.Scene + "\x00" + m.Email + "\x00" + m.Code + "\x00" + strconv.FormatInt(m.CreatedAtEpochSeconds, 10)))
	return "code-" + hex.EncodeToString(sum[:16])
}
