package objstore_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/objstore"
)

func TestURLs(t *testing.T) {
	t.Parallel()
	d := newDir(t, objstore.Options{})
	s := newS3(t, objstore.Options{})
	other := newS3(t, objstore.Options{}) // same bucket, another endpoint

	require.Equal(t, "file://"+d.root+"/avatars/u1/a%20b.png", d.store.URL("avatars/u1/a b.png"))
	su, err := url.Parse(s.store.URL("avatars/a.png"))
	require.NoError(t, err)
	require.Equal(t, "s3", su.Scheme)
	require.Equal(t, testBucket, su.Host)
	require.Equal(t, "/avatars/a.png", su.Path)
	require.Equal(t, "us-east-1", su.Query().Get("region"))
	require.Equal(t, "true", su.Query().Get("secure"))
	require.NotContains(t, s.store.URL("k"), "test-secret")

	stores := []objstore.Store{d.store, s.store, other.store}
	for _, key := range goodKeys {
		for _, st := range stores {
			u := st.URL(key)
			got, err := st.Key(u)
			require.NoError(t, err, u)
			require.Equal(t, key, got, u)
			found, got, err := objstore.Locate(u, stores...)
			require.NoError(t, err, u)
			require.Equal(t, key, got)
			require.Same(t, st, found, u)
		}
	}

	// A URL of another store, or none, is told apart from a malformed one.
	_, err = d.store.Key(s.store.URL("k"))
	require.ErrorIs(t, err, objstore.ErrOtherStore)
	_, err = s.store.Key(other.store.URL("k"))
	require.ErrorIs(t, err, objstore.ErrOtherStore)
	_, err = s.store.Key(d.store.URL("k"))
	require.ErrorIs(t, err, objstore.ErrOtherStore)
	_, err = d.store.Key("file:///elsewhere/k")
	require.ErrorIs(t, err, objstore.ErrOtherStore)
	_, _, err = objstore.Locate("file:///elsewhere/k", d.store, s.store)
	require.ErrorIs(t, err, objstore.ErrOtherStore)
	_, err = d.store.Key("file://" + d.root + "/a/../../etc/passwd")
	require.ErrorIs(t, err, objstore.ErrBadKey)
	_, _, err = objstore.Locate("file://"+d.root+"/a/../../etc/passwd", d.store)
	require.ErrorIs(t, err, objstore.ErrBadKey)
	_, err = s.store.Key(s.store.URL("k") + "&extra=1")
	require.ErrorIs(t, err, objstore.ErrBadURL)
	_, _, err = objstore.Locate("%zz", d.store)
	require.ErrorIs(t, err, objstore.ErrBadURL)

	// The URL a Put's object is stored under reads it back.
	data := randomBytes(1000, 9)
	_, err = s.store.Put(context.Background(), "x/y", bytes.NewReader(data), -1, "")
	require.NoError(t, err)
	found, key, err := objstore.Locate(s.store.URL("x/y"), d.store, s.store)
	require.NoError(t, err)
	got, _ := readAll(t, found, key)
	require.Equal(t, data, got)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	creds := objstore.Options{AccessKey: "a", SecretKey: "s"}
	cases := []struct {
		url  string
		opts objstore.Options
		want []string // all of them in the message
	}{
		{"%zz", creds, []string{"bad URL", "invalid URL escape"}},
		{"http://host/x", creds, []string{`scheme "http", want file or s3`}},
		{"/abs/dir", creds, []string{`scheme "", want file or s3`}},
		{"file://host/dir", creds, []string{`host "host"`}},
		{"file:relative/dir", creds, []string{"not absolute"}},
		{"file://" + dir + "?x=1", creds, []string{"no user, query or fragment"}},
		{"file://" + dir + "/missing", creds, []string{"no such file or directory"}},
		{"file://" + file, creds, []string{"not a directory"}},
		{"file://" + dir, objstore.Options{MaxSize: -1}, []string{"MaxSize -1 is negative"}},
		{"s3://bucket", creds, []string{"endpoint is required"}},
		{"s3://Bad_Bucket?endpoint=h:9000", creds, []string{`bucket "Bad_Bucket"`}},
		{"s3://bucket?endpoint=http://h:9000", creds, []string{"no scheme or path"}},
		{"s3://bucket?endpoint=h:9000&secure=maybe", creds, []string{`secure "maybe"`}},
		{"s3://bucket?endpoint=h:9000&acl=public", creds, []string{`unknown parameter "acl"`}},
		{"s3://bucket?endpoint=h:9000&endpoint=g:9000", creds, []string{"endpoint given 2 times"}},
		{"s3://key:secret@bucket?endpoint=h:9000", creds, []string{"credentials in the URL", "key:xxxxx@"}},
		// every problem at once
		{"s3://Bad_Bucket?secure=maybe&acl=x", creds, []string{"Bad_Bucket", "secure", "acl", "endpoint is required"}},
		{"s3://bucket/some/key?endpoint=h:9000", creds, []string{"names a bucket, not an object"}},
		{"s3://bucket?endpoint=h:9000", objstore.Options{}, []string{"needs Options.AccessKey and SecretKey"}},
		{"s3://bucket?endpoint=h:9000", objstore.Options{AccessKey: "a", SecretKey: "s", PartSize: 1 << 20}, []string{"under S3's 5 MiB"}},
	}
	for _, c := range cases {
		s, err := objstore.Open(c.url, c.opts)
		require.Error(t, err, c.url)
		require.Nil(t, s)
		for _, w := range c.want {
			require.Contains(t, err.Error(), w, c.url)
		}
		require.NotContains(t, err.Error(), "secret@", c.url)
	}
	for _, u := range []string{"%zz", "http://h/x", "file://h/d", "s3://bucket", "s3://b?endpoint=h&x=1"} {
		_, err := objstore.Open(u, creds)
		require.ErrorIs(t, err, objstore.ErrBadURL, u)
	}

	// Well-formed URLs open without network I/O.
	for _, u := range []string{"file://" + dir, "file://localhost" + dir, "s3://bucket?endpoint=h:9000", "s3://bucket/?endpoint=h&region=auto&secure=false"} {
		_, err := objstore.Open(u, creds)
		require.NoError(t, err, u)
	}
}
