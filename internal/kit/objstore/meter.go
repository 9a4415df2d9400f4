package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

// meter is the reader a store uploads from: it hashes and counts what passes
// and stops the stream, with an error it remembers, when the object grows
// over max or disagrees with its declared size. Stores check err after the
// upload, whatever the upload returned: the library may wrap or replace the
// reader's error.
type meter struct {
	ctx  context.Context
	r    io.Reader
	h    hash.Hash
	n    int64 // bytes passed on
	size int64 // declared; -1 unknown
	max  int64
	eof  bool  // the source ended
	err  error // ErrTooLarge or ErrSizeMismatch, wrapped; sticky
}

func newMeter(ctx context.Context, r io.Reader, size, max int64) *meter {
	return &meter{ctx: ctx, r: r, h: sha256.New(), size: size, max: max}
}

func (m *meter) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	if m.eof {
		return 0, io.EOF
	}
	if err := m.ctx.Err(); err != nil {
		return 0, err
	}
	left := m.max + 1 - m.n // one byte over max tells a stream too large
	if m.size >= 0 {
		left = m.size - m.n
		if left == 0 {
			return 0, m.atEnd()
		}
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	k, err := m.r.Read(p)
	m.n += int64(k)
	if m.n > m.max {
		m.err = fmt.Errorf("over %d bytes: %w", m.max, ErrTooLarge)
		return 0, m.err
	}
	if m.size >= 0 && m.n == m.size && err == nil {
		// The last declared byte: check the source ends here before handing
		// it on, so that an upload of a truncated object never completes.
		err = m.atEnd()
		if m.err != nil {
			return 0, m.err
		}
	}
	m.h.Write(p[:k])
	if err == io.EOF && m.size >= 0 && m.n < m.size {
		m.err = fmt.Errorf("read %d bytes, declared %d: %w", m.n, m.size, ErrSizeMismatch)
		return k, m.err
	}
	if err == io.EOF {
		m.eof = true
	}
	return k, err
}

// atEnd is called once the declared size has been read: the source must be
// empty too, or the object would be stored truncated.
func (m *meter) atEnd() error {
	var b [1]byte
	k, err := io.ReadFull(m.r, b[:])
	if k > 0 {
		m.err = fmt.Errorf("more than the declared %d bytes: %w", m.size, ErrSizeMismatch)
		return m.err
	}
	if err == io.EOF {
		m.eof = true
	}
	return err
}

// info is what Put returns once the upload succeeded.
func (m *meter) info(key, contentType string) Info {
	return Info{Key: key, Size: m.n, SHA256: hex.EncodeToString(m.h.Sum(nil)), ContentType: contentType}
}

// checkSize refuses a declared size over max before anything is read.
func checkSize(size, max int64) error {
	if size > max {
		return fmt.Errorf("declared %d bytes, over %d: %w", size, max, ErrTooLarge)
	}
	return nil
}
