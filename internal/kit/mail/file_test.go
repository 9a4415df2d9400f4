package mail_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/kit/mail"
)

func TestMailFileMailerWritesEMLByKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mailer, err := isle.Open((&url.URL{Scheme: "file", Path: dir, RawQuery: "from=Isle%20%3Cno-reply%40isle.example%3E"}).String(), isle.Options{})
	require.NoError(t, err)

	m := testMessage()
	require.NoError(t, mailer.Send(context.Background(), m))
	path := filepath.Join(dir, m.IdempotencyKey+".eml")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	p := parseMail(t, raw)
	require.Equal(t, m.Subject, decodeHeader(t, p.header.Get("Subject")))
	require.Equal(t, "<"+m.IdempotencyKey+"@isle.example>", p.header.Get("Message-ID"))
	to, err := p.header.AddressList("To")
	require.NoError(t, err)
	require.Equal(t, m.To, to[0].Address)
	require.Equal(t, m.Text, p.text)
	require.Equal(t, m.HTML, p.html)

	// A redelivery of the same dispatch replaces the file.
	m.Subject = "second delivery"
	require.NoError(t, mailer.Send(context.Background(), m))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "one file per key, no temporary files left")
	raw, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "second delivery", parseMail(t, raw).header.Get("Subject"))

	// Another key, another file.
	m.IdempotencyKey = "receipt-202611300001"
	require.NoError(t, mailer.Send(context.Background(), m))
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)
}

func TestMailFileMailerNeedsADirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := isle.Open("file://"+dir+"/missing?from=a%40b.example", isle.Options{})
	require.ErrorIs(t, err, os.ErrNotExist)
	f := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	_, err = isle.Open("file://"+f+"?from=a%40b.example", isle.Options{})
	require.ErrorContains(t, err, "not a directory")
}
