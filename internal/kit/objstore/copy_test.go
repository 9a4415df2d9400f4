package objstore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/objstore"
)

func TestCopy(t *testing.T) {
	t.Parallel()
	d := newDir(t, objstore.Options{})
	s := newS3(t, objstore.Options{})
	ctx := context.Background()
	data := randomBytes(objstore.PartSizeDefault+1000, 4)
	src, err := s.store.Put(ctx, "wallpapers/w.jpg", bytes.NewReader(data), -1, "image/jpeg")
	require.NoError(t, err)

	// s3 to directory, and back to another key's store
	out, err := objstore.Copy(ctx, d.store, s.store, "wallpapers/w.jpg", src.SHA256)
	require.NoError(t, err)
	require.Equal(t, src.SHA256, out.SHA256)
	require.Equal(t, "image/jpeg", out.ContentType)
	got, _ := readAll(t, d.store, "wallpapers/w.jpg")
	require.True(t, bytes.Equal(data, got))

	// Again: idempotent.
	_, err = objstore.Copy(ctx, d.store, s.store, "wallpapers/w.jpg", strings.ToUpper(src.SHA256))
	require.NoError(t, err)
	got, _ = readAll(t, d.store, "wallpapers/w.jpg")
	require.True(t, bytes.Equal(data, got))

	s2 := newS3(t, objstore.Options{})
	_, err = objstore.Copy(ctx, s2.store, d.store, "wallpapers/w.jpg", src.SHA256)
	require.NoError(t, err)
	got, _ = readAll(t, s2.store, "wallpapers/w.jpg")
	require.True(t, bytes.Equal(data, got))

	// A source that is not what the task expects leaves no copy.
	_, err = objstore.Copy(ctx, s2.store, s.store, "wallpapers/w.jpg", sha256Hex([]byte("other")))
	require.ErrorIs(t, err, objstore.ErrChecksum)
	_, err = s2.store.Stat(ctx, "wallpapers/w.jpg")
	require.ErrorIs(t, err, objstore.ErrNotFound)

	_, err = objstore.Copy(ctx, d.store, s.store, "missing", "")
	require.ErrorIs(t, err, objstore.ErrNotFound)
}
