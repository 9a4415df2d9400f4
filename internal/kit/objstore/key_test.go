package objstore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/objstore"
)

var badKeys = []struct{ name, key string }{
	{"empty", ""},
	{"leading slash", "/avatars/a.png"},
	{"trailing slash", "avatars/"},
	{"double slash", "avatars//a.png"},
	{"dot dot", "avatars/../etc/passwd"},
	{"dot dot alone", ".."},
	{"dot dot last", "avatars/.."},
	{"dot segment", "avatars/./a.png"},
	{"NUL", "avatars/a\x00.png"},
	{"newline", "avatars/a\n.png"},
	{"DEL", "avatars/a\x7f.png"},
	{"backslash", `avatars\..\a.png`},
	{"invalid UTF-8", "avatars/\xff\xfe.png"},
	{"too long", strings.Repeat("a/", objstore.MaxKeyBytes/2) + "a"},
	{"segment too long", "a/" + strings.Repeat("b", objstore.MaxSegmentBytes+1)},
}

var goodKeys = []string{
	"a",
	"avatars/u1/2026-01-01T00:00:00Z.png",
	"wallpapers/用户/壁纸 1.jpg",
	"odd/?#%&=+ ;,@!$'()*[]~.x",
	"..hidden/...three/.x",
	strings.Repeat("a", objstore.MaxSegmentBytes),
	strings.Repeat(strings.Repeat("é", 127)+"/", 4) + strings.Repeat("z", objstore.MaxKeyBytes-4*255), // 1,024 bytes
}

func TestValidKey(t *testing.T) {
	t.Parallel()
	for _, c := range badKeys {
		require.ErrorIs(t, objstore.ValidKey(c.key), objstore.ErrBadKey, c.name)
	}
	for _, k := range goodKeys {
		require.NoError(t, objstore.ValidKey(k))
	}
	require.Len(t, goodKeys[len(goodKeys)-1], objstore.MaxKeyBytes)
}

// The stores check keys themselves, on every call.
func TestStoresRefuseBadKeys(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, contents := b.open(t, objstore.Options{})
			ctx := context.Background()
			for _, c := range badKeys {
				_, err := s.Put(ctx, c.key, strings.NewReader("x"), 1, "")
				require.ErrorIs(t, err, objstore.ErrBadKey, c.name)
				_, _, err = s.Get(ctx, c.key)
				require.ErrorIs(t, err, objstore.ErrBadKey, c.name)
				_, err = s.Stat(ctx, c.key)
				require.ErrorIs(t, err, objstore.ErrBadKey, c.name)
				require.ErrorIs(t, s.Delete(ctx, c.key), objstore.ErrBadKey, c.name)
			}
			require.Empty(t, contents(t))
			for i, k := range goodKeys {
				data := randomBytes(100+i, uint64(i))
				_, err := s.Put(ctx, k, bytes.NewReader(data), -1, "")
				require.NoError(t, err, k)
				got, _ := readAll(t, s, k)
				require.Equal(t, data, got, k)
			}
		})
	}
}

// A key must not reach the directory store's temporary files.
func TestDirRefusesTempNames(t *testing.T) {
	t.Parallel()
	f := newDir(t, objstore.Options{})
	_, err := f.store.Put(context.Background(), "a/.objstore-tmp-123", strings.NewReader("x"), 1, "")
	require.ErrorIs(t, err, objstore.ErrBadKey)
}
