package mail

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"net/url"
	"slices"
	"time"
)

// Open opens the mailer a URL names:
//
//	smtp://host[:port]?from=A[&tls=starttls|tls|none][&auth=plain|login]
//	resend://host[:port][/base]?from=A[&secure=false]
//	file:///abs/dir?from=A
//
// from is required everywhere: a bare address or "Name <addr>", URL-encoded.
// For smtp, tls defaults to starttls (required, on port 587 by default);
// tls=tls is implicit TLS (port 465), tls=none plain text (port 25), for
// local catchers such as Mailpit. Credentials come from opts, never from
// the URL: with opts.Username set the mailer authenticates with AUTH PLAIN
// (auth=login for LOGIN). For resend, requests go to
// https://host[:port][/base]/emails (http with secure=false) with
// opts.APIKey, which is required. The directory of a file URL must exist.
// Open does no network I/O; every problem of the URL is reported at once,
// wrapped in ErrBadURL.
func Open(rawURL string, opts Options) (Mailer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("mail: open %s: negative timeout %v", u.Redacted(), opts.Timeout)
	}
	opts.Timeout = cmp.Or(opts.Timeout, TimeoutDefault)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch u.Scheme {
	case "smtp":
		return openSMTP(u, opts)
	case "resend":
		return openResend(u, opts)
	case "file":
		return openFile(u, opts)
	}
	return nil, fmt.Errorf("%w %s: scheme %q, want smtp, resend or file", ErrBadURL, u.Redacted(), u.Scheme)
}

// urlParams reads the query of u: each parameter at most once, only the
// names known, from required and valid. It returns the other parameters'
// values ("" when absent) with the problems found.
func urlParams(u *url.URL, known ...string) (*mail.Address, map[string]string, []error) {
	var errs []error
	if u.User != nil {
		errs = append(errs, errors.New("credentials in the URL: the URL is logged; pass them in Options"))
	}
	if u.Fragment != "" || u.Opaque != "" {
		errs = append(errs, errors.New("a fragment or opaque part in a mailer URL"))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		errs = append(errs, fmt.Errorf("query: %w", err))
	}
	known = append(known, "from")
	params := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		v := q[name]
		switch {
		case !slices.Contains(known, name):
			errs = append(errs, fmt.Errorf("unknown parameter %q (want %v)", name, known))
		case len(v) > 1:
			errs = append(errs, fmt.Errorf("%s given %d times", name, len(v)))
		default:
			params[name] = v[0]
		}
	}
	from, err := parseFrom(params["from"])
	if err != nil {
		errs = append(errs, err)
	}
	delete(params, "from")
	return from, params, errs
}

// parseFrom reads the from parameter: "addr" or "Name <addr>".
func parseFrom(v string) (*mail.Address, error) {
	if v == "" {
		return nil, errors.New("from is required: ?from=no-reply@example.com")
	}
	if hasControl(v) {
		return nil, errors.New("from has control characters")
	}
	a, err := mail.ParseAddress(v)
	if err != nil {
		return nil, fmt.Errorf("from %q: %w", v, err)
	}
	if err := ValidAddress(a.Address); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	return a, nil
}

// urlErrors joins the problems found in a URL under ErrBadURL.
func urlErrors(u *url.URL, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s: %w", ErrBadURL, u.Redacted(), errors.Join(errs...))
}
