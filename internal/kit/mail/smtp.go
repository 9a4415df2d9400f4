package mail

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strconv"

	gomail "github.com/wneessen/go-mail"
)

// smtpMailer sends through one SMTP server, a connection per message.
type smtpMailer struct {
	host string
	from *mail.Address
	// base are the client options every Send uses; the timeout is added
	// per Send, from the context.
	base []gomail.Option
	opts Options
}

func openSMTP(u *url.URL, opts Options) (Mailer, error) {
	from, params, errs := urlParams(u, "tls", "auth")
	if u.Path != "" && u.Path != "/" {
		errs = append(errs, fmt.Errorf("path %q: an smtp URL names a server only", u.Path))
	}
	host := u.Hostname()
	if host == "" {
		errs = append(errs, errors.New("host is required: smtp://host:port"))
	}
	var base []gomail.Option
	port := 0
	switch mode := params["tls"]; mode {
	case "", "starttls":
		port = gomail.DefaultPortTLS
		base = append(base, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case "tls":
		port = gomail.DefaultPortSSL
		base = append(base, gomail.WithSSL())
	case "none":
		port = gomail.DefaultPort
		base = append(base, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		errs = append(errs, fmt.Errorf("tls %q: want starttls, tls or none", mode))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("port %q: want 1 to 65535", p))
		}
		port = n
	}
	auth := gomail.SMTPAuthPlain
	switch a := params["auth"]; a {
	case "", "plain":
	case "login":
		auth = gomail.SMTPAuthLogin
	default:
		errs = append(errs, fmt.Errorf("auth %q: want plain or login", a))
	}
	if (opts.Username == "") != (opts.Password == "") {
		errs = append(errs, errors.New("SMTP username and password: give both or neither"))
	}
	if err := urlErrors(u, errs); err != nil {
		return nil, err
	}
	base = append(base, gomail.WithPort(port))
	if opts.Username != "" {
		base = append(base, gomail.WithSMTPAuth(auth), gomail.WithUsername(opts.Username), gomail.WithPassword(opts.Password))
	} else {
		base = append(base, gomail.WithSMTPAuth(gomail.SMTPAuthNoAuth))
	}
	// Check the options once, so that Send only fails on sending.
	if _, err := gomail.NewClient(host, base...); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBadURL, u.Redacted(), err)
	}
	return &smtpMailer{host: host, from: from, base: base, opts: opts}, nil
}

// Send opens a connection, sends m and closes it. A recipient or content
// the server refuses with a 5xx reply is permanent. A failure to connect,
// to start TLS or to authenticate, and a refused sender (MAIL FROM: "please
// authenticate first", a sender domain not allowed) are temporary even
// with a 5xx reply: the server or the mailer's configuration is at fault,
// not the message, which a replay from the DLQ can send once that is fixed.
func (s *smtpMailer) Send(ctx context.Context, m Message) error {
	if err := m.check(); err != nil {
		return err
	}
	msg, err := buildMsg(s.from, m, s.opts.Now())
	if err != nil {
		return fmt.Errorf("mail: smtp %s: %w", m.IdempotencyKey, err)
	}
	opts := append(s.base[:len(s.base):len(s.base)], gomail.WithTimeout(sendTimeout(ctx, s.opts.Timeout)))
	c, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return fmt.Errorf("mail: smtp %s: %w", m.IdempotencyKey, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mail: smtp %s to %s: %w", m.IdempotencyKey, m.To, classifySMTP(err))
	}
	return nil
}

// classifySMTP marks a refusal of the message itself as permanent.
func classifySMTP(err error) error {
	var se *gomail.SendError
	if !errors.As(err, &se) {
		return err // dial, TLS, AUTH, context: temporary
	}
	switch se.Reason {
	case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
		return permanent(err)
	case gomail.ErrSMTPRcptTo, gomail.ErrSMTPData, gomail.ErrSMTPDataClose:
		if code := se.ErrorCode(); code >= 500 && code < 600 {
			return permanent(err)
		}
	}
	return err
}
