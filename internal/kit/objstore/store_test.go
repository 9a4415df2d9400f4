package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/objstore"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, _ := b.open(t, objstore.Options{})
			ctx := context.Background()
			// Sizes around one part: a single PUT, and multipart with a
			// short last part, for known and unknown sizes.
			for i, n := range []int{0, 1, 100 << 10, objstore.PartSizeDefault, objstore.PartSizeDefault + 3} {
				for _, known := range []bool{true, false} {
					data := randomBytes(n, uint64(i))
					size := int64(n)
					if !known {
						size = -1
					}
					key := "avatars/u1/" + string(rune('a'+i)) + map[bool]string{true: "-known", false: "-unknown"}[known] + ".png"
					info, err := s.Put(ctx, key, onlyReader{bytes.NewReader(data)}, size, "image/png")
					require.NoError(t, err, key)
					require.Equal(t, objstore.Info{Key: key, Size: int64(n), SHA256: sha256Hex(data), ContentType: "image/png"}, info)

					got, ginfo := readAll(t, s, key)
					require.True(t, bytes.Equal(data, got), "%s: bytes read back differ (%d vs %d bytes)", key, len(got), n)
					require.Equal(t, int64(n), ginfo.Size)
					st, err := s.Stat(ctx, key)
					require.NoError(t, err)
					require.Equal(t, int64(n), st.Size)
					if b.keepsCT {
						require.Equal(t, "image/png", ginfo.ContentType)
						require.Equal(t, "image/png", st.ContentType)
					}
				}
			}
		})
	}
}

func TestPutReplaces(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, contents := b.open(t, objstore.Options{})
			ctx := context.Background()
			first, second := randomBytes(5000, 1), randomBytes(3000, 2)
			_, err := s.Put(ctx, "k", bytes.NewReader(first), -1, "")
			require.NoError(t, err)
			info, err := s.Put(ctx, "k", bytes.NewReader(second), int64(len(second)), "")
			require.NoError(t, err)
			require.Equal(t, sha256Hex(second), info.SHA256)
			got, _ := readAll(t, s, "k")
			require.Equal(t, second, got)
			require.Equal(t, []string{"k"}, contents(t))
		})
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, contents := b.open(t, objstore.Options{})
			ctx := context.Background()
			_, _, err := s.Get(ctx, "missing/key")
			require.ErrorIs(t, err, objstore.ErrNotFound)
			_, err = s.Stat(ctx, "missing/key")
			require.ErrorIs(t, err, objstore.ErrNotFound)
			require.NoError(t, s.Delete(ctx, "missing/key"), "deleting a missing key is not an error")

			data := randomBytes(10, 3)
			_, err = s.Put(ctx, "dir/obj", bytes.NewReader(data), 10, "")
			require.NoError(t, err)
			// A prefix of a key, and a key through an object, are no objects.
			_, _, err = s.Get(ctx, "dir")
			require.ErrorIs(t, err, objstore.ErrNotFound)
			_, _, err = s.Get(ctx, "dir/obj/deeper")
			require.ErrorIs(t, err, objstore.ErrNotFound)
			require.NoError(t, s.Delete(ctx, "dir"))
			got, _ := readAll(t, s, "dir/obj")
			require.Equal(t, data, got, "deleting a prefix left the object alone")

			require.NoError(t, s.Delete(ctx, "dir/obj"))
			_, _, err = s.Get(ctx, "dir/obj")
			require.ErrorIs(t, err, objstore.ErrNotFound)
			require.Empty(t, contents(t))
		})
	}
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			const max = 1000
			s, contents := b.open(t, objstore.Options{MaxSize: max})
			ctx := context.Background()

			_, err := s.Put(ctx, "declared", bytes.NewReader(randomBytes(max+1, 1)), max+1, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			_, err = s.Put(ctx, "streamed", bytes.NewReader(randomBytes(max+1, 1)), -1, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			require.Empty(t, contents(t), "an object over the limit left something")

			// At the limit is allowed; a later Put over it keeps the object.
			data := randomBytes(max, 2)
			_, err = s.Put(ctx, "k", bytes.NewReader(data), -1, "")
			require.NoError(t, err)
			_, err = s.Put(ctx, "k", bytes.NewReader(randomBytes(max+500, 3)), -1, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			got, _ := readAll(t, s, "k")
			require.Equal(t, data, got)
			require.Equal(t, []string{"k"}, contents(t))
		})
	}
}

// Over the limit after several parts: the S3 store has uploaded parts and
// must abort the upload.
func TestTooLargeMultipart(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			max := int64(2*objstore.PartSizeDefault + 100)
			s, contents := b.open(t, objstore.Options{MaxSize: max})
			_, err := s.Put(context.Background(), "big", newPattern(1, max+1), -1, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			require.Empty(t, contents(t))
		})
	}
}

func TestBadReader(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, contents := b.open(t, objstore.Options{})
			ctx := context.Background()
			cases := []struct {
				name string
				r    io.Reader
				size int64
				want error
			}{
				{"short", bytes.NewReader(randomBytes(99, 1)), 100, objstore.ErrSizeMismatch},
				{"long", bytes.NewReader(randomBytes(101, 1)), 100, objstore.ErrSizeMismatch},
				{"long-multipart", newPattern(2, objstore.PartSizeDefault+10), objstore.PartSizeDefault + 9, objstore.ErrSizeMismatch},
				{"failing", io.MultiReader(bytes.NewReader(randomBytes(50, 1)), iotest.ErrReader(boom)), -1, boom},
				{"failing-known", io.MultiReader(bytes.NewReader(randomBytes(50, 1)), iotest.ErrReader(boom)), 100, boom},
			}
			for _, c := range cases {
				_, err := s.Put(ctx, c.name, c.r, c.size, "")
				require.ErrorIs(t, err, c.want, c.name)
			}
			require.Empty(t, contents(t))
		})
	}
}

func TestCanceled(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, contents := b.open(t, objstore.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			// The reader cancels the Put's context in the middle of the stream.
			r := io.MultiReader(newPattern(1, 100<<10), readerFunc(func([]byte) (int, error) {
				cancel()
				return 0, io.EOF
			}), newPattern(2, 100<<10))
			_, err := s.Put(ctx, "k", r, -1, "")
			require.ErrorIs(t, err, context.Canceled)
			require.Empty(t, contents(t))
		})
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestWithMaxSize(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			inner, contents := b.open(t, objstore.Options{MaxSize: 10_000})
			s := objstore.WithMaxSize(inner, 100)
			ctx := context.Background()
			_, err := s.Put(ctx, "a", bytes.NewReader(randomBytes(101, 1)), 101, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			_, err = s.Put(ctx, "b", bytes.NewReader(randomBytes(101, 1)), -1, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			require.Empty(t, contents(t))

			data := randomBytes(100, 2)
			info, err := s.Put(ctx, "c", bytes.NewReader(data), -1, "")
			require.NoError(t, err)
			require.Equal(t, sha256Hex(data), info.SHA256)
			got, _ := readAll(t, s, "c")
			require.Equal(t, data, got)
			require.Equal(t, inner.URL("c"), s.URL("c"))

			// The inner limit still holds under a looser wrapper.
			_, err = objstore.WithMaxSize(inner, 1<<20).Put(ctx, "d", bytes.NewReader(randomBytes(10_001, 3)), -1, "")
			require.ErrorIs(t, err, objstore.ErrTooLarge)
			require.Equal(t, []string{"c"}, contents(t))
		})
	}
}
