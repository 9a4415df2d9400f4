package mail_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/kit/mail"
)

func TestMailOpenAcceptsTheDocumentedURLs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		opts isle.Options
	}{
		{"smtp://127.0.0.1:1025?tls=none&from=no-reply%40isle.example", isle.Options{}},
		{"smtp://smtp.example.com?from=Isle%20%3Cno-reply%40isle.example%3E", isle.Options{Username: "u", Password: "p"}},
		{"smtp://smtp.example.com:465?tls=tls&auth=login&from=no-reply%40isle.example", isle.Options{Username: "u", Password: "p"}},
		{"smtp://smtp.example.com/?tls=starttls&from=no-reply%40isle.example", isle.Options{}},
		{"resend://api.resend.com?from=no-reply%40isle.example", isle.Options{APIKey: "re_x"}},
		{"resend://127.0.0.1:8080/base?secure=false&from=no-reply%40isle.example", isle.Options{APIKey: "re_x", Timeout: time.Second}},
		{"file://" + dir + "?from=no-reply%40isle.example", isle.Options{}},
	} {
		m, err := isle.Open(tc.url, tc.opts)
		require.NoError(t, err, tc.url)
		require.NotNil(t, m)
	}
}

func TestMailOpenRefusesBadURLs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := isle.Options{APIKey: "re_x"}
	for _, tc := range []struct {
		url  string
		opts isle.Options
		want string
	}{
		{"smtp://127.0.0.1:1025?tls=none", isle.Options{}, "from is required"},
		{"smtp://127.0.0.1:1025?tls=none&from=nobody", isle.Options{}, "from"},
		{"smtp://127.0.0.1:1025?tls=none&from=a%40localhost", isle.Options{}, "no dot"},
		{"smtp://127.0.0.1:1025?tls=none&from=a%40b.co%0d%0aBcc:%20x%40y.z", isle.Options{}, "control"},
		{"smtp://user:secret@127.0.0.1:1025?tls=none&from=a%40b.co", isle.Options{}, "credentials in the URL"},
		{"smtp://127.0.0.1:1025?tls=maybe&from=a%40b.co", isle.Options{}, "tls"},
		{"smtp://127.0.0.1:1025?from=a%40b.co&from=c%40d.co", isle.Options{}, "2 times"},
		{"smtp://127.0.0.1:1025?from=a%40b.co&password=x", isle.Options{}, "unknown parameter"},
		{"smtp://127.0.0.1:99999?from=a%40b.co", isle.Options{}, "port"},
		{"smtp://127.0.0.1/path?from=a%40b.co", isle.Options{}, "path"},
		{"smtp://?from=a%40b.co", isle.Options{}, "host is required"},
		{"smtp://h.example?from=a%40b.co&auth=xoauth", isle.Options{Username: "u", Password: "p"}, "auth"},
		{"smtp://h.example?from=a%40b.co", isle.Options{Username: "u"}, "both or neither"},
		{"resend://api.resend.com?from=a%40b.co", isle.Options{}, "API key"},
		{"resend://api.resend.com?from=a%40b.co&secure=maybe", key, "secure"},
		{"resend://?from=a%40b.co", key, "host is required"},
		{"file://" + dir, isle.Options{}, "from is required"},
		{"file://elsewhere" + dir + "?from=a%40b.co", isle.Options{}, "local directory"},
		{"file:relative?from=a%40b.co", isle.Options{}, "opaque"},
		{"http://api.resend.com?from=a%40b.co", key, "scheme"},
		{"smtp://[::1?from=a%40b.co", isle.Options{}, "bad URL"},
	} {
		_, err := isle.Open(tc.url, tc.opts)
		require.ErrorIs(t, err, isle.ErrBadURL, tc.url)
		require.ErrorContains(t, err, tc.want, tc.url)
		require.NotContains(t, err.Error(), "secret", "the error is logged: no password in it")
	}
	// Every problem at once.
	_, err := isle.Open("smtp://127.0.0.1:1025?tls=maybe&x=1", isle.Options{})
	require.ErrorContains(t, err, "tls")
	require.ErrorContains(t, err, "unknown parameter")
	require.ErrorContains(t, err, "from is required")
}
