package objstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// s3Store keeps objects in one bucket of an S3-compatible service.
type s3Store struct {
	client   *minio.Client
	loc      s3Location
	max      int64
	partSize uint64
}

// s3Location is what a store URL says: it is compared to tell the stores'
// object URLs apart.
type s3Location struct {
	bucket   string
	endpoint string
	region   string
	secure   bool
}

// parseS3 reads bucket and parameters of an s3:// URL, store or object; the
// path (the key, for an object URL) is left to the caller.
func parseS3(u *url.URL) (s3Location, error) {
	var errs []error
	loc := s3Location{bucket: u.Host, secure: true}
	if u.User != nil {
		errs = append(errs, errors.New("credentials in the URL: the URL is stored in MySQL and logged; pass them in Options"))
	}
	if u.Fragment != "" || u.Opaque != "" {
		errs = append(errs, errors.New("a fragment or opaque part in an s3 URL"))
	}
	if err := s3utils.CheckValidBucketNameStrict(loc.bucket); err != nil {
		errs = append(errs, fmt.Errorf("bucket %q: %w", loc.bucket, err))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		errs = append(errs, fmt.Errorf("query: %w", err))
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		v := q[name]
		if len(v) > 1 {
			errs = append(errs, fmt.Errorf("%s given %d times", name, len(v)))
			continue
		}
		switch name {
		case "endpoint":
			loc.endpoint = v[0]
			if strings.Contains(loc.endpoint, "://") || strings.ContainsAny(loc.endpoint, "/?#@") {
				errs = append(errs, fmt.Errorf("endpoint %q: want host or host:port, no scheme or path (secure=false for http)", loc.endpoint))
			}
		case "region":
			loc.region = v[0]
		case "secure":
			if loc.secure, err = strconv.ParseBool(v[0]); err != nil {
				errs = append(errs, fmt.Errorf("secure %q: want true or false", v[0]))
			}
		default:
			errs = append(errs, fmt.Errorf("unknown parameter %q (want endpoint, region, secure)", name))
		}
	}
	if loc.endpoint == "" {
		errs = append(errs, errors.New("endpoint is required: s3://bucket?endpoint=host:port"))
	}
	return loc, urlErrors(u, errs)
}

// query is the canonical query of a store's URLs.
func (l s3Location) query() string {
	q := url.Values{"endpoint": {l.endpoint}, "secure": {strconv.FormatBool(l.secure)}}
	if l.region != "" {
		q.Set("region", l.region)
	}
	return q.Encode()
}

func openS3(u *url.URL, opts Options) (Store, error) {
	loc, err := parseS3(u)
	if err != nil {
		return nil, err
	}
	var errs []error
	if u.Path != "" && u.Path != "/" {
		errs = append(errs, fmt.Errorf("path %q: a store URL names a bucket, not an object", u.Path))
	}
	if opts.AccessKey == "" || opts.SecretKey == "" {
		errs = append(errs, errors.New("an s3 store needs Options.AccessKey and SecretKey"))
	}
	partSize := cmp.Or(opts.PartSize, PartSizeDefault)
	if partSize < minPartSize {
		errs = append(errs, fmt.Errorf("PartSize %d is under S3's 5 MiB", opts.PartSize))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("objstore: open %s: %w", u.Redacted(), errors.Join(errs...))
	}
	client, err := minio.New(loc.endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, ""),
		Secure:    loc.secure,
		Region:    loc.region,
		Transport: opts.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", u.Redacted(), err)
	}
	return &s3Store{client: client, loc: loc, max: cmp.Or(opts.MaxSize, MaxSizeDefault), partSize: uint64(partSize)}, nil
}

// Put hands minio-go a meter: a plain reader, so minio-go uploads a known
// size up to one part in one PUT and anything else as a multipart upload,
// part after part from one buffer of partSize. When the meter stops the
// stream, minio-go aborts the multipart upload, and a single PUT never
// completes: no object appears.
func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("objstore: put: %w", err)
	}
	if err := checkSize(size, s.max); err != nil {
		return Info{}, fmt.Errorf("objstore: put %s: %w", key, err)
	}
	m := newMeter(ctx, r, size, s.max)
	var body io.Reader = m
	if size < 0 {
		// minio-go uploads an empty stream of unknown size as an empty
		// part, which some servers refuse: learn whether it is empty.
		var first [1]byte
		n, err := io.ReadFull(m, first[:])
		switch {
		case err == io.EOF:
			size = 0
		case err != nil:
			return Info{}, fmt.Errorf("objstore: put %s: %w", key, err)
		default:
			body = io.MultiReader(bytes.NewReader(first[:n]), m)
		}
	}
	up, err := s.client.PutObject(ctx, s.loc.bucket, key, body, size, minio.PutObjectOptions{
		ContentType: contentType,
		PartSize:    s.partSize,
		NumThreads:  uploadThreads,
	})
	if m.err != nil {
		return Info{}, fmt.Errorf("objstore: put %s: %w", key, m.err)
	}
	if err != nil {
		return Info{}, fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if up.Size != m.n {
		return Info{}, fmt.Errorf("objstore: put %s: stored %d bytes of %d read", key, up.Size, m.n)
	}
	return m.info(key, contentType), nil
}

func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ValidKey(key); err != nil {
		return nil, Info{}, fmt.Errorf("objstore: get: %w", err)
	}
	obj, err := s.client.GetObject(ctx, s.loc.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("objstore: get %s: %w", key, s3Error(err))
	}
	st, err := obj.Stat() // the first request: errors of GetObject show here
	if err != nil {
		_ = obj.Close()
		return nil, Info{}, fmt.Errorf("objstore: get %s: %w", key, s3Error(err))
	}
	return obj, Info{Key: key, Size: st.Size, ContentType: st.ContentType}, nil
}

func (s *s3Store) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("objstore: stat: %w", err)
	}
	st, err := s.client.StatObject(ctx, s.loc.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("objstore: stat %s: %w", key, s3Error(err))
	}
	return Info{Key: key, Size: st.Size, ContentType: st.ContentType}, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("objstore: delete: %w", err)
	}
	if err := s.client.RemoveObject(ctx, s.loc.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if err := s3Error(err); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("objstore: delete %s: %w", key, err)
		}
	}
	return nil
}

// s3Error maps a missing object to ErrNotFound. A missing bucket is not: it
// is a misconfigured store, and retrying will not help the caller's case.
func s3Error(err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket) {
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	return err
}

func (s *s3Store) URL(key string) string {
	return (&url.URL{Scheme: "s3", Host: s.loc.bucket, Path: "/" + key, RawQuery: s.loc.query()}).String()
}

func (s *s3Store) Key(objectURL string) (string, error) {
	u, err := parseURL(objectURL)
	if err != nil {
		return "", err
	}
	if u.Scheme != "s3" {
		return "", fmt.Errorf("%w: %s is not an s3 URL", ErrOtherStore, u.Redacted())
	}
	loc, err := parseS3(u)
	if err != nil {
		return "", err
	}
	if loc != s.loc {
		return "", fmt.Errorf("%w: %s is not in %s", ErrOtherStore, u.Redacted(), s.URL(""))
	}
	key, _ := strings.CutPrefix(u.Path, "/")
	if err := ValidKey(key); err != nil {
		return "", err
	}
	return key, nil
}
