package objstore

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// Sentinel errors callers branch on; the errors returned wrap them with the
// key or URL concerned.
var (
	// ErrNotFound: no object under the key.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrBadKey: the key fails ValidKey (or a store's own rule).
	ErrBadKey = errors.New("objstore: bad key")
	// ErrTooLarge: the object is over the store's MaxSize; nothing was stored.
	ErrTooLarge = errors.New("objstore: object too large")
	// ErrSizeMismatch: the reader gave more or fewer bytes than the size
	// Put was told; nothing was stored.
	ErrSizeMismatch = errors.New("objstore: size does not match the declared size")
	// ErrBadURL: a store or object URL that Open or Key cannot use.
	ErrBadURL = errors.New("objstore: bad URL")
	// ErrOtherStore: an object URL that belongs to another store.
	ErrOtherStore = errors.New("objstore: URL of another store")
	// ErrChecksum: Copy read a source whose SHA-256 is not the expected one.
	ErrChecksum = errors.New("objstore: checksum mismatch")
)

// Store keeps objects under keys. Implementations are safe for concurrent use.
type Store interface {
	// Put streams r into the object key, replacing any object there, and
	// returns its size and SHA-256, both measured on the bytes stored. size
	// is the number of bytes r holds, or -1 when unknown; a known size is
	// checked against r. A size or stream over the store's MaxSize gives
	// ErrTooLarge, a reader that disagrees with size ErrSizeMismatch; in
	// both cases, and on any other error, no new object is visible under
	// key (an object already there stays).
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error)
	// Get opens the object key for reading; the caller closes it. A missing
	// key gives ErrNotFound. Info.SHA256 is empty: stores do not keep it.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat returns what Get would, without the bytes.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// URL is the object URL of key, as stored in MySQL. It carries no
	// credentials. Key is its inverse.
	URL(key string) string
	// Key returns the key of an object URL of this store; a URL of
	// another store gives ErrOtherStore, a malformed one ErrBadURL or
	// ErrBadKey.
	Key(objectURL string) (string, error)
}

// Info describes an object.
type Info struct {
	Key         string
	Size        int64
	SHA256      string // lower-case hex; set by Put only
	ContentType string // "" where the store keeps none (the directory store)
}

// Options configures a store opened by Open. Zero fields take their default.
type Options struct {
	// MaxSize is the largest object Put accepts, in bytes (MaxSizeDefault).
	MaxSize int64
	// AccessKey and SecretKey sign S3 requests; an s3:// store requires
	// both. They never come from the URL, which is stored and logged: the
	// binaries read them from OBJECT_STORE_ACCESS_KEY and
	// OBJECT_STORE_SECRET_KEY.
	AccessKey, SecretKey string
	// PartSize is the S3 multipart part size (PartSizeDefault), at least
	// 5 MiB. An upload holds one part in memory.
	PartSize int64
	// Transport carries S3 requests (nil: minio-go's default). Tests set
	// one that trusts their TLS server.
	Transport http.RoundTripper
}

const (
	// MaxSizeDefault bounds an object when Options.MaxSize is zero. The
	// seeds give no upload size; 64 MiB holds any avatar or wallpaper.
	MaxSizeDefault = 64 << 20
	// PartSizeDefault is the S3 part size when Options.PartSize is zero.
	PartSizeDefault = 8 << 20
	// minPartSize is S3's smallest part but the last.
	minPartSize = 5 << 20
	// uploadThreads is minio-go's NumThreads. Put hands minio-go a plain
	// reader, so parts go one at a time with one buffer; this bounds the
	// parallel paths should that change.
	uploadThreads = 2
)
