package objstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/objstore"
)

// A 64 MiB object streams through Put and Get with memory bounded by the
// part size, not the object. These tests do not run in parallel: the heap
// is the process's. The fake S3 runs in a child process, which holds the
// object; this process holds only the client.
func TestStreamBoundedMemory(t *testing.T) {
	const size = 64 << 20
	want := sha256.New()
	_, err := io.Copy(want, newPattern(42, size))
	require.NoError(t, err)
	wantSHA := hex.EncodeToString(want.Sum(nil))

	cases := []struct {
		name  string
		open  func(t *testing.T) objstore.Store
		bound uint64
	}{
		{"dir", func(t *testing.T) objstore.Store {
			t.Helper()
			return newDir(t, objstore.Options{MaxSize: size}).store
		}, 8 << 20},
		{"s3", func(t *testing.T) objstore.Store {
			t.Helper()
			return fakeS3Process(t, objstore.Options{MaxSize: size}).store
		}, 40 << 20},
	}
	for _, c := range cases {
		for _, known := range []bool{false, true} {
			name := c.name + map[bool]string{false: "/unknown-size", true: "/known-size"}[known]
			t.Run(name, func(t *testing.T) {
				s := c.open(t)
				ctx := context.Background()
				n := int64(-1)
				if known {
					n = size
				}
				var info objstore.Info
				peak := peakHeapGrowth(func() {
					info, err = s.Put(ctx, "big", onlyReader{newPattern(42, size)}, n, "application/octet-stream")
				})
				require.NoError(t, err)
				require.Equal(t, int64(size), info.Size)
				require.Equal(t, wantSHA, info.SHA256)
				t.Logf("put 64 MiB: peak heap growth %.1f MiB", float64(peak)/(1<<20))
				require.Less(t, peak, c.bound, "put held too much")

				peak = peakHeapGrowth(func() {
					rc, ginfo, gerr := s.Get(ctx, "big")
					require.NoError(t, gerr)
					defer rc.Close()
					require.Equal(t, int64(size), ginfo.Size)
					sameStream(t, newPattern(42, size), rc)
				})
				t.Logf("get 64 MiB: peak heap growth %.1f MiB", float64(peak)/(1<<20))
				require.Less(t, peak, c.bound, "get held too much")
			})
		}
	}
}
