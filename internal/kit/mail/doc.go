// Package mail sends Isle's mail through a mailer chosen by URL: an SMTP
// server (smtp://host:port?tls=starttls&from=...), a Resend-compatible HTTP
// API (resend://api.resend.com?from=...) or, for development, a directory
// that receives each message as an .eml file (file:///abs/dir?from=...).
// It also owns the mails' words: embedded text and HTML templates for the
// verification code of each scene (doc/mail.md) and for the payment receipt
// (doc/payments.md), and ValidAddress, the address check the API applies before
// anything is published. It knows nothing else of Isle.
//
// Errors say whether a retry can help: an error wrapping ErrPermanent (a
// malformed message, a recipient or message the server refused with a 5xx
// reply, an HTTP 4xx other than 408, 409-in-progress and 429) will fail
// again, any other error (connection refused, timeouts, 4xx SMTP replies,
// HTTP 429 and 5xx) may not. Every message carries an idempotency key so
// that a redelivered dispatch is recognisable downstream. doc/mail.md has
// the URL forms, the variables the binaries read and the templates.
package mail
