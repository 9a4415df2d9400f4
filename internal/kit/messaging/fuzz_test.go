package messaging_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/kit/messaging"
)

// A retry header comes from any producer, as any text: ParseRetry never
// panics and always gives a count in 0..MaxRetryHeader, the number itself
// when the header is one in range.
func FuzzParseRetry(f *testing.F) {
	for _, s := range []string{"", "0", "2", "-5", "abc", "3.0", "1e3", "NaN", "-Inf", "+Inf", "0x10", " 4 ", "99999999999999999999",
		"1048577", "9.223372036854775807e18", "\u00a05"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := messaging.ParseRetry(s)
		if n < 0 || n > messaging.MaxRetryHeader {
			t.Fatalf("%q: %d", s, n)
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && v >= 0 && v <= messaging.MaxRetryHeader && n != int(v) {
			t.Fatalf("%q: %d, want %d", s, n, v)
		}
	})
}
