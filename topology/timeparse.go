package topology

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"
)

// Go's parser accepts a fractional second after the seconds field even when
// the layout has none, so these cover "…:02", "…:02.5" and Java's minute
// precision "…T20:01".
var (
	layoutsOffset = []string{"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04Z07:00"}
	layoutsLocal  = []string{"2006-01-02T15:04:05", "2006-01-02T15:04"}
)

// epochText is the string form Jackson's InstantDeserializer reads as epoch
// seconds rather than ISO-8601.
var epochText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// maxEpoch is 10000-01-01T00:00:00Z in seconds; larger magnitudes are refused
// before any conversion.
var maxEpoch = decimal.NewFromInt(253402300800)

const maxISOLen = 64 // longer strings are no date-time of ours

// parseISO reads an ISO-8601 date-time; hasOffset tells whether it carried an
// offset (or Z). Without one it is UTC+8 wall time.
func parseISO(s string) (v time.Time, hasOffset bool, err error) {
	if len(s) > maxISOLen {
		return time.Time{}, false, fmt.Errorf("date-time of %d bytes: too long", len(s))
	}
	for _, layout := range layoutsOffset {
		if v, err := time.Parse(layout, s); err == nil {
			_, off := v.Zone()
			if off > maxOffset || off < -maxOffset {
				return time.Time{}, true, fmt.Errorf("%q: offset beyond ±18:00", s)
			}
			v = v.In(zoneFor(off))
			return v, true, checkRange(v)
		}
	}
	for _, layout := range layoutsLocal {
		if v, err := time.ParseInLocation(layout, s, UTC8); err == nil {
			return v, false, checkRange(v)
		}
	}
	return time.Time{}, false, fmt.Errorf("%q is not an ISO-8601 date-time", s)
}

// parseEpoch reads decimal epoch seconds, truncating below the nanosecond.
func parseEpoch(text string) (time.Time, error) {
	d, err := boundedDecimal(text)
	if err != nil {
		return time.Time{}, err
	}
	if d.Abs().GreaterThanOrEqual(maxEpoch) {
		return time.Time{}, fmt.Errorf("epoch seconds %s: %w", text, errTimeRange)
	}
	sec := d.IntPart()
	nsec := d.Sub(decimal.NewFromInt(sec)).Shift(9).IntPart()
	v := time.Unix(sec, nsec).UTC()
	if err := checkRange(v); err != nil {
		return time.Time{}, fmt.Errorf("epoch seconds %s: %w", text, err)
	}
	return v, nil
}

// parseLocalArray reads Jackson 2's [y,m,d,h,mi(,s(,nanos))] as UTC+8 wall
// time; [] is null. Every part must be a JSON integer in its calendar range.
func parseLocalArray(data []byte) (time.Time, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return time.Time{}, err
	}
	if len(parts) == 0 {
		return time.Time{}, nil
	}
	if len(parts) < 5 || len(parts) > 7 {
		return time.Time{}, fmt.Errorf("array of %d elements: want [y,m,d,h,mi(,s(,nanos))]", len(parts))
	}
	var n [7]int
	for i, p := range parts {
		v, err := strconv.ParseInt(string(p), 10, 32)
		if err != nil {
			return time.Time{}, fmt.Errorf("array element %d: want an integer, got %.20s", i, p)
		}
		n[i] = int(v)
	}
	limits := [7]struct {
		name     string
		min, max int
	}{
		{"year", 1, 9999}, {"month", 1, 12}, {"day", 1, 31}, {"hour", 0, 23},
		{"minute", 0, 59}, {"second", 0, 59}, {"nanosecond", 0, 999_999_999},
	}
	for i, l := range limits {
		if n[i] < l.min || n[i] > l.max {
			return time.Time{}, fmt.Errorf("%s %d: want %d..%d", l.name, n[i], l.min, l.max)
		}
	}
	if days := time.Date(n[0], time.Month(n[1])+1, 0, 0, 0, 0, 0, time.UTC).Day(); n[2] > days {
		return time.Time{}, fmt.Errorf("day %d: month %d of %d has %d days", n[2], n[1], n[0], days)
	}
	v := time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], n[6], UTC8)
	return v, checkRange(v)
}

// checkRange holds a time to four-digit years in its own zone and after Go's
// zero time, the null of both time types.
func checkRange(v time.Time) error {
	if y := v.Year(); y < 1 || y > 9999 || !v.After(time.Time{}) {
		return errTimeRange
	}
	return nil
}

// zones caches one *time.Location per offset (at most 2161 whole-minute
// offsets within ±18:00), so equal decoded values are equal with ==.
var zones sync.Map

func zoneFor(offset int) *time.Location {
	switch offset {
	case 0:
		return time.UTC
	case 8 * 60 * 60:
		return UTC8
	}
	if z, ok := zones.Load(offset); ok {
		return z.(*time.Location)
	}
	z, _ := zones.LoadOrStore(offset, time.FixedZone("", offset))
	return z.(*time.Location)
}
