package objstore_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eisland/isle/internal/kit/objstore"
)

// fuzzStores are a directory store and an S3 store (opened without I/O),
// as the replication consumer holds its source and replica stores.
func fuzzStores(f *testing.F) (dir objstore.Store, root string, s3 objstore.Store) {
	f.Helper()

	root = f.TempDir()
	dir, err := objstore.Open("file://"+root, objstore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	s3, err = objstore.Open("s3://isle-test?endpoint=s3.example.test:9000&region=us-east-1&secure=true",
		objstore.Options{AccessKey: "a", SecretKey: "s"})
	if err != nil {
		f.Fatal(err)
	}
	return dir, root, s3
}

// A key ValidKey accepts names a file inside a directory store's root and
// an S3 object, and its URL in either store leads back to it; a refused
// key is an ErrBadKey.
func FuzzValidKey(f *testing.F) {
	for _, c := range badKeys {
		f.Add(c.key)
	}
	for _, k := range goodKeys {
		f.Add(k)
	}
	dir, root, s3 := fuzzStores(f)
	f.Fuzz(func(t *testing.T, key string) {
		if err := objstore.ValidKey(key); err != nil {
			if !errors.Is(err, objstore.ErrBadKey) {
				t.Fatalf("%q: %v is not an ErrBadKey", key, err)
			}
			return
		}
		if len(key) > objstore.MaxKeyBytes || !utf8.ValidString(key) || strings.ContainsAny(key, "\\\x00\r\n\x7f") {
			t.Fatalf("accepted %q", key)
		}
		for seg := range strings.SplitSeq(key, "/") {
			if seg == "" || seg == "." || seg == ".." || len(seg) > objstore.MaxSegmentBytes {
				t.Fatalf("accepted %q, with a segment %q", key, seg)
			}
		}
		if p := filepath.Join(root, key); !strings.HasPrefix(p, root+string(filepath.Separator)) || p != root+"/"+key {
			t.Fatalf("accepted %q, which is %s under %s", key, p, root)
		}
		if got, err := s3.Key(s3.URL(key)); err != nil || got != key {
			t.Fatalf("%q: its S3 URL %s reads back as %q (%v)", key, s3.URL(key), got, err)
		}
		got, err := dir.Key(dir.URL(key))
		if err != nil && !(errors.Is(err, objstore.ErrBadKey) && strings.Contains(key, ".objstore-tmp-")) || err == nil && got != key {
			t.Fatalf("%q: its file URL %s reads back as %q (%v)", key, dir.URL(key), got, err)
		}
	})
}

// Locate resolves an object URL (a replication task's source_url, which
// comes from MySQL) only within the stores it is given: whatever the URL,
// it never panics, and a URL it resolves is the store's URL of the key it
// returns, a valid key. Anything else is refused as another store's, a bad
// URL or a bad key.
func FuzzLocate(f *testing.F) {
	dir, root, s3 := fuzzStores(f)
	for _, u := range []string{
		dir.URL("avatar/ann/1/me.png"), s3.URL("avatar/ann/1/me.png"),
		"file://" + root + "/../etc/passwd", "file://" + root + "/a%2F..%2F..%2Fetc", "file:///etc/passwd", "file://host" + root + "/a",
		"file://" + root + "/a?x=1", "file://" + root + "/a#f", "file://u:p@" + root + "/a",
		"s3://isle-test/a?endpoint=evil.example:9000&region=us-east-1&secure=true", "s3://other/a?endpoint=s3.example.test:9000",
		"s3://isle-test/../a?endpoint=s3.example.test:9000&region=us-east-1&secure=true", "http://example.com/a", "%zz", "",
		strings.Repeat("a/", 600),
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, objectURL string) {
		s, key, err := objstore.Locate(objectURL, dir, s3)
		if err != nil {
			if !errors.Is(err, objstore.ErrOtherStore) && !errors.Is(err, objstore.ErrBadURL) && !errors.Is(err, objstore.ErrBadKey) {
				t.Fatalf("%q: refused with %v", objectURL, err)
			}
			return
		}
		if s != dir && s != s3 {
			t.Fatalf("%q: located in a store it was not given", objectURL)
		}
		if objstore.ValidKey(key) != nil {
			t.Fatalf("%q: located as the bad key %q", objectURL, key)
		}
		if back, err := s.Key(s.URL(key)); err != nil || back != key {
			t.Fatalf("%q: located as %q, whose URL %s reads back as %q (%v)", objectURL, key, s.URL(key), back, err)
		}
	})
}
