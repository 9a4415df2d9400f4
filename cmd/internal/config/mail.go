package config

import (
	"net/url"
	"slices"
)

// Mail is the worker's mailer (doc/mail.md): where verification codes and
// receipts go.
type Mail struct {
	URL      string
	Username string
	Password string
	APIKey   string
}

// MailURLDefault is the development mailer: each mail an .eml file in a
// directory, made at start when missing.
const MailURLDefault = "file:///var/tmp/isle/mail?from=Isle%20%3Cno-reply%40isle.local%3E"

func loadMail(l *loader) Mail {
	m := Mail{
		URL: l.String("EMAIL_MAILER_URL", MailURLDefault,
			"The mailer: smtp://host:port?from=A&tls=starttls|tls|none, resend://api.resend.com?from=A, or file:///abs/dir?from=A (each mail an .eml file; the directory is made when missing). from is the sender, URL-encoded (doc/mail.md)."),
		Username: l.Secret("EMAIL_SMTP_USERNAME", "", "SMTP user name (AUTH PLAIN); empty: no authentication."),
		Password: l.Secret("EMAIL_SMTP_PASSWORD", "", "SMTP password."),
		APIKey:   l.Secret("EMAIL_RESEND_API_KEY", "", "API key of a resend:// mailer."),
	}
	if u, err := url.Parse(m.URL); err != nil || !slices.Contains([]string{"smtp", "resend", "file"}, u.Scheme) {
		l.failf("EMAIL_MAILER_URL", m.URL, "want an smtp://, resend:// or file:// URL")
	}
	return m
}
