package objstore

import (
	"errors"
	"fmt"
	"net/url"
)

// Open opens the store a URL names:
//
//	file:///abs/dir                                   a directory, which must exist
//	s3://bucket?endpoint=host:port&region=r&secure=b  an S3-compatible bucket
//
// For s3, endpoint is required (host or host:port, no scheme), region is
// optional (empty: minio-go asks the endpoint) and secure defaults to true
// (https). Credentials come from opts, never from the URL. Open does no
// network I/O: a missing bucket shows at the first request. Every problem
// of the URL is reported at once, wrapped in ErrBadURL.
func Open(rawURL string, opts Options) (Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("objstore: open %s: MaxSize %d is negative", u.Redacted(), opts.MaxSize)
	}
	switch u.Scheme {
	case "file":
		return openDir(u, opts)
	case "s3":
		return openS3(u, opts)
	}
	return nil, fmt.Errorf("%w %s: scheme %q, want file or s3", ErrBadURL, u.Redacted(), u.Scheme)
}

// Locate finds among stores the one an object URL belongs to (a replication
// task's source_url), and the object's key there. Only configured stores
// are searched: a URL never opens a store of its own, so a task cannot
// point the consumer at a file or endpoint it was not given.
func Locate(objectURL string, stores ...Store) (Store, string, error) {
	for _, s := range stores {
		key, err := s.Key(objectURL)
		if errors.Is(err, ErrOtherStore) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return s, key, nil
	}
	u, err := parseURL(objectURL)
	if err != nil {
		return nil, "", err
	}
	return nil, "", fmt.Errorf("%w: no configured store holds %s", ErrOtherStore, u.Redacted())
}

// parseURL parses without echoing the URL into the error, since a URL
// given by mistake with a password would end up in a log.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return u, nil
}

// urlErrors joins the problems found in a URL under ErrBadURL.
func urlErrors(u *url.URL, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s: %w", ErrBadURL, u.Redacted(), errors.Join(errs...))
}
