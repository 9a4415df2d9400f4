package mail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors callers branch on; the errors returned wrap them with what
// was concerned.
var (
	// ErrPermanent: sending the same message again will fail again. The
	// consumer sends such a message to its DLQ at once instead of retrying.
	ErrPermanent = errors.New("mail: permanent failure")
	// ErrBadURL: a mailer URL that Open cannot use.
	ErrBadURL = errors.New("mail: bad URL")
	// ErrBadAddress: an address that fails ValidAddress.
	ErrBadAddress = errors.New("mail: bad address")
	// ErrBadMessage: a Message that Send refuses before any I/O (always
	// wrapped together with ErrPermanent).
	ErrBadMessage = errors.New("mail: bad message")
	// ErrUnknownScene: a verification scene with no template.
	ErrUnknownScene = errors.New("mail: unknown scene")
)

// Mailer sends one message. Implementations are safe for concurrent use.
type Mailer interface {
	// Send delivers m from the mailer's From address. An error wrapping
	// ErrPermanent means a retry will fail too; any other error may be
	// retried. Sending the same IdempotencyKey twice may deliver twice over
	// SMTP (the copies share a Message-ID), never over Resend within its
	// 24-hour idempotency window, and replaces the file of the directory
	// mailer.
	Send(ctx context.Context, m Message) error
}

// Message is one mail to one recipient. Subject and at least one of Text
// and HTML are required; with both, the mail is multipart/alternative.
type Message struct {
	To      string // a bare address that passes ValidAddress
	Subject string // one line, no control characters
	Text    string // text/plain body
	HTML    string // text/html body
	// IdempotencyKey names this dispatch, the same on every redelivery
	// (e.g. "code-<traceId>", "receipt-<outTradeNo>"): 1 to 128 bytes of
	// ASCII letters, digits, '.', '_' and '-', not starting or ending with
	// '.' and without "..". It is Resend's Idempotency-Key, the local part
	// of the SMTP Message-ID (<key@from-domain>) and the directory
	// mailer's file name (<key>.eml).
	IdempotencyKey string
}

// Options configures a mailer opened by Open. Zero fields take their
// default. Credentials never come from the URL, which is logged: the
// binaries read them from EMAIL_SMTP_USERNAME, EMAIL_SMTP_PASSWORD and
// EMAIL_RESEND_API_KEY.
type Options struct {
	// Username and Password authenticate to an SMTP server (AUTH PLAIN, or
	// LOGIN with auth=login in the URL); both or neither. go-mail refuses
	// to send them unencrypted except to localhost.
	Username, Password string
	// APIKey is the Resend API key, sent as a bearer token; required by
	// resend:// URLs.
	APIKey string
	// Timeout bounds one Send (TimeoutDefault), or less when the context's
	// deadline is sooner. For SMTP it bounds the dial and each exchange.
	Timeout time.Duration
	// HTTPClient carries Resend requests (nil: a client with Timeout).
	HTTPClient *http.Client
	// Now is the clock for the Date header (nil: time.Now).
	Now func() time.Time
}

// TimeoutDefault bounds a Send when Options.Timeout is zero: a stuck server
// holds a consumer goroutine no longer than this.
const TimeoutDefault = 10 * time.Second

// maxKeyLen bounds an IdempotencyKey: well under Resend's 256 and a file
// name's 255 bytes.
const maxKeyLen = 128

// validKey checks an IdempotencyKey against the rule on Message.
func validKey(k string) error {
	if k == "" || len(k) > maxKeyLen {
		return fmt.Errorf("idempotency key of %d bytes, want 1 to %d", len(k), maxKeyLen)
	}
	for i := range len(k) {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("idempotency key %q: byte %q, want letters, digits, '.', '_', '-'", k, c)
		}
	}
	if k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, "..") {
		return fmt.Errorf("idempotency key %q: leading, trailing or doubled '.'", k)
	}
	return nil
}

// check refuses a message no mailer could send, before any I/O.
func (m Message) check() error {
	var errs []error
	if err := ValidAddress(m.To); err != nil {
		errs = append(errs, fmt.Errorf("to: %w", err))
	}
	if m.Subject == "" {
		errs = append(errs, errors.New("empty subject"))
	} else if hasControl(m.Subject) {
		errs = append(errs, errors.New("subject has control characters"))
	}
	if m.Text == "" && m.HTML == "" {
		errs = append(errs, errors.New("neither text nor HTML body"))
	}
	if err := validKey(m.IdempotencyKey); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w: %w", ErrPermanent, ErrBadMessage, errors.Join(errs...))
	}
	return nil
}

// permanent marks err as one a retry cannot fix.
func permanent(err error) error {
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// sendTimeout is the time left for one Send: opts' timeout, or less if ctx
// ends sooner.
func sendTimeout(ctx context.Context, timeout time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < timeout {
			return max(left, time.Millisecond)
		}
	}
	return timeout
}
