package messaging_test

import (
	"testing"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/stretchr/testify/require"
)

func TestClip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short enough", "abc", 3, "abc"},
		{"ascii cut", "abcdef", 4, "abcd"},
		{"multibyte rune at the cut is dropped whole", "ab€cd", 4, "ab"}, // € is 3 bytes: 2..4
		{"multibyte rune ending at the cut is kept", "ab€cd", 5, "ab€"},
		{"invalid byte before the cut is kept", "a\xffbcdef", 4, "a\xffbc"},
		{"invalid byte and a partial rune", "\xffé€", 4, "\xffé"},
		{"zero", "abc", 0, ""},
		{"negative", "abc", -1, ""},
	} {
		require.Equal(t, c.want, messaging.Clip(c.in, c.n), c.name)
	}
}
