package objstore

import (
	"context"
	"fmt"
	"io"
)

// WithMaxSize returns s with a lower size limit for Put: the API stores
// avatars and wallpapers in one store, each kind under its own limit. A max
// at or over the store's own limit changes nothing; the store's limit still
// applies.
func WithMaxSize(s Store, max int64) Store {
	return &limited{Store: s, max: max}
}

type limited struct {
	Store
	max int64
}

func (l *limited) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	if err := checkSize(size, l.max); err != nil {
		return Info{}, fmt.Errorf("objstore: put %s: %w", key, err)
	}
	// The inner store discards the object when its reader fails; the
	// meter's error says why, whatever the store made of it.
	m := newMeter(ctx, r, -1, l.max)
	info, err := l.Store.Put(ctx, key, m, size, contentType)
	if m.err != nil {
		return Info{}, fmt.Errorf("objstore: put %s: %w", key, m.err)
	}
	return info, err
}
