package mail

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxAddressLen is the longest address ValidAddress accepts: RFC 5321's
// path limit less the angle brackets.
const MaxAddressLen = 254

// ValidAddress accepts a bare address (user@example.com) fit for a mail
// header and an SMTP envelope: at most MaxAddressLen bytes of valid UTF-8,
// no control characters (so no CR/LF and no header injection), parsed by
// net/mail into an address equal to the input (no display name, comment,
// quoting or angle brackets) with a domain name (not an [address]
// literal) that has a dot and no empty label. The error wraps ErrBadAddress and quotes the input.
func ValidAddress(s string) error {
	if err := checkAddress(s); err != nil {
		return fmt.Errorf("%w %q: %s", ErrBadAddress, s, err)
	}
	return nil
}

func checkAddress(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > MaxAddressLen:
		return fmt.Errorf("%d bytes, want at most %d", len(s), MaxAddressLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("not valid UTF-8")
	case hasControl(s):
		return fmt.Errorf("control characters")
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return err
	}
	if a.Name != "" || a.Address != s {
		return fmt.Errorf("want a bare address, not %q", a.Address)
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	if strings.HasPrefix(domain, "[") {
		return fmt.Errorf("domain literal %s: want a domain name", domain)
	}
	if !strings.Contains(domain, ".") {
		return fmt.Errorf("domain %q has no dot", domain)
	}
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" {
			return fmt.Errorf("domain %q has an empty label", domain)
		}
	}
	return nil
}

// hasControl reports a C0 or C1 control character or DEL in s.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}
