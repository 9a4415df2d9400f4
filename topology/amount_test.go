package topology_test

import (
	"testing"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// An amount's error says what is wrong with it: a producer that sends a
// negative amount must read that the sign is the problem, not its digits.
func TestAmountErrorNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"-1":            "negative",
		"-0.5":          "negative",
		"0":             "want > 0",
		"1.123456789":   "at most 8 decimal places",
		"1234567890123": "at most 12 digits before the point",
		"1e3":           "a plain decimal",
		" 1":            "a plain decimal",
		"+1":            "a plain decimal",
	}
	for in, want := range cases {
		_, err := topology.AgentBillingDeduct{Username: "u", ModelName: "m", AmountFen: in}.Amount()
		require.ErrorContains(t, err, want, "amountFen %q", in)
	}
}
