package mail_test

import (
	"context"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/kit/mail"
)

var fixedNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testMessage() isle.Message {
	return isle.Message{
		To:      "user@example.org",
		Subject: "Isle 注册验证码：123456",
		Text:    "Your code:\n\n    123456\n\nIt expires in 5 minutes. A long line to make quoted-printable wrap it: " + strings.Repeat("x", 100) + "\n",
		HTML:    "<!DOCTYPE html>\n<p style=\"font-size:32px\">123456</p>\n<p>验证码 5 分钟内有效</p>\n",
		// One dispatch, one key: redeliveries reuse it.
		IdempotencyKey: "code-3f1c2a9e.REGISTER",
	}
}

func openSMTP(t *testing.T, s *smtpServer, query string, opts isle.Options) isle.Mailer {
	t.Helper()
	opts.Now = func() time.Time { return fixedNow }
	m, err := isle.Open("smtp://"+s.addr+"?from="+query, opts)
	require.NoError(t, err)
	return m
}

// assertDelivered checks the one message s received against m.
func assertDelivered(t *testing.T, s *smtpServer, m isle.Message) {
	t.Helper()
	got := s.messages()
	require.Len(t, got, 1)
	require.Equal(t, "no-reply@isle.example", got[0].from)
	require.Equal(t, []string{m.To}, got[0].to)
	p := parseMail(t, got[0].data)
	from, err := mail.ParseAddress(decodeHeader(t, p.header.Get("From")))
	require.NoError(t, err)
	require.Equal(t, "Isle", from.Name)
	require.Equal(t, "no-reply@isle.example", from.Address)
	to, err := p.header.AddressList("To")
	require.NoError(t, err)
	require.Len(t, to, 1)
	require.Equal(t, m.To, to[0].Address)
	require.Equal(t, m.Subject, decodeHeader(t, p.header.Get("Subject")))
	require.Equal(t, "<"+m.IdempotencyKey+"@isle.example>", p.header.Get("Message-ID"))
	date, err := p.header.Date()
	require.NoError(t, err)
	require.True(t, fixedNow.Equal(date), "date %v", date)
	require.Equal(t, "auto-generated", p.header.Get("Auto-Submitted"))
	require.Empty(t, p.header.Get("Bcc"))
	require.Equal(t, m.Text, p.text)
	require.Equal(t, m.HTML, p.html)
}

func TestMailSMTPSendsTextAndHTML(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, nil)
	mailer := openSMTP(t, s, "Isle%20%3Cno-reply%40isle.example%3E&tls=none", isle.Options{})
	m := testMessage()
	require.NoError(t, mailer.Send(context.Background(), m))
	assertDelivered(t, s, m)
}

func TestMailSMTPAuthPlain(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, func(s *smtpServer) { s.user, s.pass = "isle", "s3cret" })
	m := testMessage()
	from := "Isle%20%3Cno-reply%40isle.example%3E&tls=none"

	// Without credentials the server refuses MAIL FROM (502 5.7.0): the
	// mailer's configuration is at fault, not the message.
	err := openSMTP(t, s, from, isle.Options{}).Send(context.Background(), m)
	require.ErrorContains(t, err, "502")
	require.NotErrorIs(t, err, isle.ErrPermanent)
	require.Empty(t, s.messages())

	// A wrong password fails AUTH: temporary, the message is not to blame.
	err = openSMTP(t, s, from, isle.Options{Username: "isle", Password: "wrong"}).Send(context.Background(), m)
	require.ErrorContains(t, err, "535")
	require.NotErrorIs(t, err, isle.ErrPermanent)
	require.Empty(t, s.messages())

	require.NoError(t, openSMTP(t, s, from, isle.Options{Username: "isle", Password: "s3cret"}).Send(context.Background(), m))
	assertDelivered(t, s, m)
}

func TestMailSMTPRefusedRecipientIsPermanent(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, func(s *smtpServer) {
		s.refuse["gone@example.org"] = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		s.refuse["busy@example.org"] = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
	})
	mailer := openSMTP(t, s, "no-reply%40isle.example&tls=none", isle.Options{})
	m := testMessage()

	m.To = "gone@example.org"
	err := mailer.Send(context.Background(), m)
	require.ErrorIs(t, err, isle.ErrPermanent)
	require.ErrorContains(t, err, "550")

	m.To = "busy@example.org"
	err = mailer.Send(context.Background(), m)
	require.Error(t, err)
	require.NotErrorIs(t, err, isle.ErrPermanent)
	require.ErrorContains(t, err, "451")

	require.Empty(t, s.messages())
}

func TestMailSMTPServerDownIsTemporary(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	mailer, err := isle.Open("smtp://"+addr+"?from=no-reply%40isle.example&tls=none", isle.Options{Timeout: 2 * time.Second})
	require.NoError(t, err)
	err = mailer.Send(context.Background(), testMessage())
	require.Error(t, err)
	require.NotErrorIs(t, err, isle.ErrPermanent)
	require.ErrorContains(t, err, "refused")
}

func TestMailSMTPDefaultRequiresSTARTTLS(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, nil) // offers no STARTTLS
	mailer := openSMTP(t, s, "no-reply%40isle.example", isle.Options{})
	err := mailer.Send(context.Background(), testMessage())
	require.ErrorContains(t, err, "STARTTLS")
	require.NotErrorIs(t, err, isle.ErrPermanent)
	require.Empty(t, s.messages())
}

func TestMailSMTPBadMessageSendsNothing(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, nil)
	mailer := openSMTP(t, s, "no-reply%40isle.example&tls=none", isle.Options{})
	for name, change := range map[string]func(*isle.Message){
		"header injection": func(m *isle.Message) { m.To = "a@b.c\r\nBcc: x@y.z" },
		"subject newline":  func(m *isle.Message) { m.Subject = "hi\r\nBcc: x@y.z" },
		"no body":          func(m *isle.Message) { m.Text, m.HTML = "", "" },
		"no key":           func(m *isle.Message) { m.IdempotencyKey = "" },
		"key with slash":   func(m *isle.Message) { m.IdempotencyKey = "../etc" },
	} {
		m := testMessage()
		change(&m)
		err := mailer.Send(context.Background(), m)
		require.ErrorIs(t, err, isle.ErrPermanent, name)
		require.ErrorIs(t, err, isle.ErrBadMessage, name)
	}
	require.Zero(t, s.sessionCount(), "a bad message must not reach the server")
}
