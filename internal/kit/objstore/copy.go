package objstore

import (
	"context"
	"fmt"
	"strings"
)

// Copy streams the object key from src to dst under the same key, as the
// replication consumer does, and returns what dst stored. When wantSHA256
// is set and the bytes copied hash otherwise, the copy is deleted from dst
// and the error wraps ErrChecksum. Copy is idempotent: running it again
// rewrites the same bytes. The content type is src's, which is empty when
// src is a directory store (dst then uses its default).
func Copy(ctx context.Context, dst, src Store, key, wantSHA256 string) (Info, error) {
	rc, in, err := src.Get(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("objstore: copy %s: %w", key, err)
	}
	defer rc.Close()
	out, err := dst.Put(ctx, key, rc, in.Size, in.ContentType)
	if err != nil {
		return Info{}, fmt.Errorf("objstore: copy %s: %w", key, err)
	}
	if wantSHA256 != "" && !strings.EqualFold(out.SHA256, wantSHA256) {
		if err := dst.Delete(ctx, key); err != nil {
			return Info{}, fmt.Errorf("objstore: copy %s: sha256 %s, want %s: %w; and deleting the copy: %w",
				key, out.SHA256, wantSHA256, ErrChecksum, err)
		}
		return Info{}, fmt.Errorf("objstore: copy %s: sha256 %s, want %s: %w", key, out.SHA256, wantSHA256, ErrChecksum)
	}
	return out, nil
}
