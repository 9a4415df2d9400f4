package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// UTC8 is the zone of the eIsland backend (UTC+8, no daylight saving): a
// LocalDateTime is its wall time. Decoded times that carry this offset use
// this very *time.Location, so decoded values compare equal with ==.
var UTC8 = time.FixedZone("UTC+8", 8*60*60)

// OffsetDateTime is a Java OffsetDateTime: an instant with its UTC offset.
// The zero value is Java's null.
//
// It encodes as RFC 3339 with the value's own offset and trimmed nanoseconds
// ("2026-11-29T20:01:02.5+08:00", "2026-11-29T12:01:02Z"); an offset that is
// not a whole number of minutes, or beyond Java's ±18:00, is written as UTC
// (the same instant). It decodes that form, an ISO string without offset (read
// as UTC+8 wall time), minute precision ("2026-11-29T20:01+08:00"), and
// Jackson 2's numeric form: decimal epoch seconds (1764417662.123456789, an
// integer, or a JSON string holding either), decoded as UTC like Jackson does.
// Fractions beyond nanoseconds are truncated toward zero, as Jackson does.
type OffsetDateTime struct{ time.Time }

// LocalDateTime is a Java LocalDateTime: a wall-clock time without a zone.
// Isle reads and writes it as UTC+8 wall time, the zone of the eIsland
// backend. The zero value is Java's null.
//
// It encodes as "2026-11-29T20:01:02" (fractional seconds only when not zero)
// in UTC+8 whatever the zone of Time. It decodes that form, minute precision,
// an ISO string with an offset or Z (converted to UTC+8 wall time), and
// Jackson 2's array form [y,m,d,h,mi], [y,m,d,h,mi,s] or [y,m,d,h,mi,s,nanos];
// [] and "" are null, as in Jackson.
type LocalDateTime struct{ time.Time }

// Both types accept years 1 to 9999 (in their own zone) and instants after
// 0001-01-01T00:00:00Z, Go's zero time, which stands for null.
var errTimeRange = errors.New("out of range: want years 0001-9999, after 0001-01-01T00:00:00Z")

const (
	layoutLocal = "2006-01-02T15:04:05.999999999"
	maxOffset   = 18 * 60 * 60 // seconds; Java's ZoneOffset limit
)

// MarshalJSON implements json.Marshaler; see OffsetDateTime.
func (t OffsetDateTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	v := t.Time
	if _, off := v.Zone(); off%60 != 0 || off > maxOffset || off < -maxOffset {
		v = v.UTC()
	}
	if err := checkRange(v); err != nil {
		return nil, fmt.Errorf("topology: OffsetDateTime %s: %w", v.UTC().Format(time.RFC3339Nano), err)
	}
	return json.Marshal(v.Format(time.RFC3339Nano))
}

// UnmarshalJSON implements json.Unmarshaler; see OffsetDateTime.
func (t *OffsetDateTime) UnmarshalJSON(data []byte) error {
	v, err := decodeOffsetDateTime(data)
	if err != nil {
		return fmt.Errorf("OffsetDateTime: %w", err)
	}
	t.Time = v
	return nil
}

// MarshalJSON implements json.Marshaler; see LocalDateTime.
func (t LocalDateTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	v := t.In(UTC8)
	if err := checkRange(v); err != nil {
		return nil, fmt.Errorf("topology: LocalDateTime %s: %w", v.Format(time.RFC3339Nano), err)
	}
	return json.Marshal(v.Format(layoutLocal))
}

// UnmarshalJSON implements json.Unmarshaler; see LocalDateTime.
func (t *LocalDateTime) UnmarshalJSON(data []byte) error {
	v, err := decodeLocalDateTime(data)
	if err != nil {
		return fmt.Errorf("LocalDateTime: %w", err)
	}
	t.Time = v
	return nil
}

func decodeOffsetDateTime(data []byte) (time.Time, error) {
	data = bytes.Trim(data, " \t\r\n")
	switch kind(data) {
	case kindNull:
		return time.Time{}, nil
	case kindNumber:
		return parseEpoch(string(data))
	case kindString:
		s, err := unquote(data)
		if err != nil || s == "" {
			return time.Time{}, err
		}
		if epochText.MatchString(s) {
			return parseEpoch(s)
		}
		v, _, err := parseISO(s)
		return v, err
	}
	return time.Time{}, fmt.Errorf("want an ISO string or epoch seconds, got %s", kind(data))
}

func decodeLocalDateTime(data []byte) (time.Time, error) {
	switch kind(data) {
	case kindNull:
		return time.Time{}, nil
	case kindArray:
		return parseLocalArray(data)
	case kindString:
		s, err := unquote(data)
		if err != nil || s == "" {
			return time.Time{}, err
		}
		v, _, err := parseISO(s)
		if err != nil {
			return time.Time{}, err
		}
		v = v.In(UTC8) // 9999-12-31T23:59:59Z is in year 10000 here
		return v, checkRange(v)
	}
	return time.Time{}, fmt.Errorf("want an ISO string or [y,m,d,h,mi,s,nanos], got %s", kind(data))
}
