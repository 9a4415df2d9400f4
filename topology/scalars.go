package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// jsonKind is the kind of a JSON value, told by its first byte.
type jsonKind int

const (
	kindInvalid jsonKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k jsonKind) String() string {
	return [...]string{"not JSON", "null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

func kind(data []byte) jsonKind {
	data = bytes.Trim(data, " \t\r\n")
	if len(data) == 0 {
		return kindInvalid
	}
	switch c := data[0]; {
	case c == 'n' && string(data) == "null":
		return kindNull
	case c == 't' || c == 'f':
		return kindBool
	case c == '"':
		return kindString
	case c == '[':
		return kindArray
	case c == '{':
		return kindObject
	case c == '-' || '0' <= c && c <= '9':
		return kindNumber
	}
	return kindInvalid
}

// unquote reads the JSON string data. One without escapes, control
// characters or invalid UTF-8 is its bytes between the quotes; the others
// go through encoding/json.
func unquote(data []byte) (string, error) {
	if t := bytes.TrimSpace(data); len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' && plain(t[1:len(t)-1]) {
		return string(t[1 : len(t)-1]), nil
	}
	var s string
	err := json.Unmarshal(data, &s)
	return s, err
}

// plain reports whether b can stand in a JSON string as it is: no quote,
// backslash or control character, and valid UTF-8.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

// javaTrim is Java's String.trim, which Jackson applies to a string it
// coerces to a number or boolean.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

const maxNumberLen = 64 // bytes of a number literal, and bound of its exponent

// boundedDecimal parses a number literal exactly, refusing forms such as
// 1e999999999 whose arithmetic would be expensive.
func boundedDecimal(text string) (decimal.Decimal, error) {
	if len(text) > maxNumberLen {
		return decimal.Decimal{}, fmt.Errorf("number of %d bytes: too long", len(text))
	}
	d, err := decimal.NewFromString(text)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%q is not a number", text)
	}
	if e := d.Exponent(); e < -maxNumberLen || e > maxNumberLen {
		return decimal.Decimal{}, fmt.Errorf("number %s: exponent out of range", text)
	}
	return d, nil
}

// decodeString coerces like Jackson's StringDeserializer: a number or a
// boolean becomes its literal text; an object or array is an error.
func decodeString(raw []byte) (string, error) {
	switch k := kind(raw); k {
	case kindNull:
		return "", nil
	case kindString:
		return unquote(raw)
	case kindNumber, kindBool:
		return string(bytes.TrimSpace(raw)), nil
	default:
		return "", fmt.Errorf("want a string, got %s", k)
	}
}

// decodeInt reads a bits-wide integer; null reports JSON null, "" or "null",
// which Jackson binds as null (0 for a primitive). A string holding an integer
// is accepted, as Jackson does. Jackson truncates 1.9 to 1; Isle accepts a
// number with a fraction or exponent only when its value is integral.
func decodeInt(raw []byte, bits int) (n int64, null bool, err error) {
	switch k := kind(raw); k {
	case kindNull:
		return 0, true, nil
	case kindNumber:
		n, err := parseInteger(string(bytes.TrimSpace(raw)), bits)
		return n, false, err
	case kindString:
		s, err := unquote(raw)
		if err != nil {
			return 0, false, err
		}
		if s = javaTrim(s); s == "" || s == "null" {
			return 0, true, nil
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return 0, false, fmt.Errorf("%.40q is not a %d-bit integer", s, bits)
		}
		return n, false, nil
	default:
		return 0, false, fmt.Errorf("want a number, got %s", k)
	}
}

func parseInteger(text string, bits int) (int64, error) {
	n, err := strconv.ParseInt(text, 10, bits)
	if err == nil {
		return n, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%.40s overflows a %d-bit integer", text, bits)
	}
	d, err := boundedDecimal(text)
	if err != nil {
		return 0, err
	}
	if !d.IsInteger() {
		return 0, fmt.Errorf("%s is not an integer", text)
	}
	lo, hi := decimal.NewFromInt(math.MinInt64>>(64-bits)), decimal.NewFromInt(math.MaxInt64>>(64-bits))
	if d.LessThan(lo) || d.GreaterThan(hi) {
		return 0, fmt.Errorf("%s overflows a %d-bit integer", text, bits)
	}
	return d.IntPart(), nil
}

// decodeBool coerces like Jackson: "true"/"false" strings (also True, TRUE),
// and integers (0 is false, any other is true).
func decodeBool(raw []byte) (bool, error) {
	switch k := kind(raw); k {
	case kindNull:
		return false, nil
	case kindBool:
		return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("t")), nil
	case kindNumber:
		text := string(bytes.TrimSpace(raw))
		if strings.ContainsAny(text, ".eE") {
			return false, fmt.Errorf("%.40s is not a boolean", text)
		}
		return strings.Trim(text, "-0") != "", nil
	case kindString:
		s, err := unquote(raw)
		if err != nil {
			return false, err
		}
		switch javaTrim(s) {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE", "", "null":
			return false, nil
		}
		return false, fmt.Errorf("%.40q is not a boolean", s)
	default:
		return false, fmt.Errorf("want a boolean, got %s", k)
	}
}
