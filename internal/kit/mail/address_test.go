package mail_test

import (
	"net/mail"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/kit/mail"
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

// An address ValidAddress accepts is fit for a header and an envelope
// whatever the input: no control character (no header injection), at most
// MaxAddressLen bytes of UTF-8, one '@' outside quotes that net/mail reads
// back as the same bare address, a domain name with a dot and no empty
// label. A refusal always wraps ErrBadAddress.
func FuzzValidAddress(f *testing.F) {
	for _, s := range []string{"a@b.co", "用户@例子.中国", "a@b.c\r\nBcc: x@y.z", "Name <a@b.co>", `"a b"@b.co`, "a@[127.0.0.1]",
		"a@b..co", "a@b.co\xff", "a\u0085@b.co", "a@b.co, c@d.co", "o'brien@example.ie", "=?utf-8?q?x?=@b.co"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := isle.ValidAddress(s)
		if err != nil {
			require.ErrorIs(t, err, isle.ErrBadAddress)
			return
		}
		require.LessOrEqual(t, len(s), isle.MaxAddressLen)
		require.True(t, utf8.ValidString(s), "%q", s)
		require.False(t, strings.ContainsFunc(s, unicode.IsControl), "%q", s)
		a, err := mail.ParseAddress(s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, s, a.Address)
		require.Empty(t, a.Name)
		domain := s[strings.LastIndexByte(s, '@')+1:]
		require.Contains(t, domain, ".", "%q", s)
		require.NotContains(t, "."+domain+".", "..", "%q", s)
		require.False(t, strings.HasPrefix(domain, "["), "%q", s)
	})
}
