package mail_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/mail"
)

func TestMailValidAddress(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	require.Len(t, long, 254)
	for _, s := range []string{
		"a@b.co",
		"user.name+tag@example.com",
		"o'brien@example.ie",
		"x_y-z@mail.example.org",
		"用户@例子.中国",
		long,
	} {
		require.NoError(t, isle.ValidAddress(s), s)
	}
	for _, s := range []string{
		"",
		"a@b.c\r\nBcc: x@y.z",
		"a@b.c\nBcc: x@y.z",
		"a@b.c\r",
		"a\x00@b.co",
		"a\x7f@b.co",
		"a\u0085@b.co", // C1 NEL
		"a@b.co\t",
		" a@b.co",
		"a@b.co ",
		"Name <a@b.co>",
		"<a@b.co>",
		"a@b.co (comment)",
		`"a b"@b.co`,
		"a@b.co, c@d.co",
		"a@localhost",
		"a@b..co",
		"a@.b.co",
		"a@b.co.",
		"a@[127.0.0.1]",
		"ab.co",
		"a@@b.co",
		"a@b.co\xff",
		long + "x",
		"x" + long,
	} {
		err := isle.ValidAddress(s)
		require.ErrorIs(t, err, isle.ErrBadAddress, "%q", s)
	}
}
