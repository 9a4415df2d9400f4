package topology

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// The rules every Validate method is built from. Each returns nil or a
// *FieldError naming the JSON field; firstError keeps the first in field order.

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// errRequired is the reason of a missing, null or blank required field.
var errRequired = errors.New("required")

// required refuses an empty or blank string: Java's null arrives as "".
func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return &FieldError{Field: field, Err: errRequired}
	}
	return nil
}

// maxEmailLen is the longest address SMTP carries (RFC 5321 path, in bytes).
const maxEmailLen = 254

// email refuses what cannot be a single recipient: blank, too long, or with
// CR/LF (header injection).
func email(field, v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return &FieldError{Field: field, Err: errRequired}
	case len(v) > maxEmailLen:
		return invalid(field, "%d bytes: want at most %d", len(v), maxEmailLen)
	case strings.ContainsAny(v, "\r\n"):
		return invalid(field, "contains CR or LF")
	}
	return nil
}

func oneOf(field, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return invalid(field, "%.40q: want one of %s", v, strings.Join(allowed, ", "))
	}
	return nil
}

// maxBytes refuses a string longer than the column that keeps it.
func maxBytes(field, v string, n int) error {
	if len(v) > n {
		return invalid(field, "%d bytes: want at most %d", len(v), n)
	}
	return nil
}

// maxChars refuses a string of more characters than its VARCHAR column
// keeps (utf8mb4 counts characters, not bytes).
func maxChars(field, v string, n int) error {
	if c := utf8.RuneCountInString(v); c > n {
		return invalid(field, "%d characters: want at most %d", c, n)
	}
	return nil
}

func nonNegative(field string, v int64) error {
	if v < 0 {
		return invalid(field, "%d: want >= 0", v)
	}
	return nil
}

func positive(field string, v int64) error {
	if v <= 0 {
		return invalid(field, "%d: want > 0", v)
	}
	return nil
}

// positivePtr refuses a nil (Java null) or a value <= 0.
func positivePtr[N int32 | int64](field string, v *N) error {
	if v == nil {
		return &FieldError{Field: field, Err: errRequired}
	}
	return positive(field, int64(*v))
}

// isRef says whether v is an Isle nonce or hash: up to 32 ASCII letters
// and digits. (Checked by hand, not by a regexp: it runs twice for every
// deduction a worker handles.)
func isRef(v string) bool {
	if len(v) > 32 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isDigit(c) && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// refText refuses a ref or hash that is not up to 32 letters and digits
// ("" is allowed: the field is optional).
func refText(field, v string) error {
	if !isRef(v) {
		return invalid(field, "%.40q: want up to 32 letters and digits", v)
	}
	return nil
}

// isAmountText says whether v is a plain decimal that fits DECIMAL(20,8),
// the ledger's column: 1 to 12 integer digits and, after a point, 1 to 8
// decimal places; no sign, no exponent. (By hand, as isRef.)
func isAmountText(v string) bool {
	whole, frac, point := strings.Cut(v, ".")
	return len(whole) >= 1 && len(whole) <= 12 && allDigits(whole) &&
		(!point || len(frac) >= 1 && len(frac) <= 8 && allDigits(frac))
}

func allDigits(v string) bool {
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return false
		}
	}
	return true
}

// plainNumber is any decimal, to say what is wrong with one isAmountText refused.
var plainNumber = regexp.MustCompile(`^-?([0-9]+)(\.([0-9]+))?$`)

// parseAmount reads an amount in fen; it must be > 0. The error says what is
// wrong: the sign, the digits before or after the point, or the form.
func parseAmount(field, v string) (decimal.Decimal, error) {
	if v == "" {
		return decimal.Decimal{}, &FieldError{Field: field, Err: errRequired}
	}
	if !isAmountText(v) {
		return decimal.Decimal{}, invalid(field, "%.40q: %s", v, amountProblem(v))
	}
	d, err := decimal.NewFromString(v)
	if err != nil {
		return decimal.Decimal{}, invalid(field, "%.40q: %v", v, err)
	}
	if !d.IsPositive() {
		return decimal.Decimal{}, invalid(field, "%s: want > 0", v)
	}
	return d, nil
}

// amountProblem says why v, which isAmountText refused, is not an amount.
func amountProblem(v string) string {
	m := plainNumber.FindStringSubmatch(v)
	switch {
	case m == nil:
		return "want a plain decimal (digits, an optional point and up to 8 places; no sign, exponent or spaces)"
	case v[0] == '-':
		return "negative: an amount is more than zero (a deduction or a charge is never signed)"
	case len(m[1]) > 12:
		return "want at most 12 digits before the point"
	default:
		return "want at most 8 decimal places"
	}
}
