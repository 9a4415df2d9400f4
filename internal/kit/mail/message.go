package mail

import (
	"net/mail"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// messageID is the Message-ID of m sent from from, without angle brackets:
// the idempotency key at the sender's domain, so that every copy of one
// dispatch carries the same id and a duplicate is recognisable (mail
// clients and many servers fold copies with one Message-ID).
func messageID(from *mail.Address, m Message) string {
	return m.IdempotencyKey + "@" + from.Address[strings.LastIndexByte(from.Address, '@')+1:]
}

// buildMsg composes m as an RFC 5322 message: text and HTML as
// multipart/alternative (or the one body given), UTF-8, quoted-printable.
// m has passed check.
func buildMsg(from *mail.Address, m Message, now time.Time) (*gomail.Msg, error) {
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	msg.FromMailAddress(from)
	if err := msg.To(m.To); err != nil {
		return nil, permanent(err)
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(messageID(from, m))
	msg.SetDateWithValue(now)
	// RFC 3834: no out-of-office replies to a machine's mail.
	msg.SetGenHeader("Auto-Submitted", "auto-generated")
	switch {
	case m.Text != "" && m.HTML != "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	case m.Text != "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	default:
		msg.SetBodyString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}
