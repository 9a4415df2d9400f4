package topology

import (
	"regexp"
	"testing"

	"pgregory.net/rapid"
)

// The hand-written checks accept exactly what the patterns they replace
// accept.
var (
	refReference    = regexp.MustCompile(`^[A-Za-z0-9]{0,32}$`)
	amountReference = regexp.MustCompile(`^[0-9]{1,12}(\.[0-9]{1,8})?$`)
)

func TestHandWrittenChecksMatchTheirPatterns(t *testing.T) {
	for _, v := range []string{"", "0", "1.", ".5", "1.5", "123456789012", "1234567890123", "1.12345678", "1.123456789",
		"01.0", "1..2", "1.2.3", "-1", "+1", "1e5", " 1", "1 ", "abcXYZ09", "a-b", "é", "1\n", "1.5\n"} {
		if got, want := isAmountText(v), amountReference.MatchString(v); got != want {
			t.Errorf("isAmountText(%q) = %v, the pattern says %v", v, got, want)
		}
		if got, want := isRef(v), refReference.MatchString(v); got != want {
			t.Errorf("isRef(%q) = %v, the pattern says %v", v, got, want)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		v := rapid.StringOfN(rapid.SampledFrom([]rune("0123456789.aZ-+e \n\x00é")), 0, 40, -1).Draw(rt, "v")
		if got, want := isAmountText(v), amountReference.MatchString(v); got != want {
			rt.Fatalf("isAmountText(%q) = %v, the pattern says %v", v, got, want)
		}
		if got, want := isRef(v), refReference.MatchString(v); got != want {
			rt.Fatalf("isRef(%q) = %v, the pattern says %v", v, got, want)
		}
	})
}
