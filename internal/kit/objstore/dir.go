package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tempPrefix starts the name of a file being written. Keys with a segment
// starting so are refused by the directory store, so that no key reads a
// half-written file.
const tempPrefix = ".objstore-tmp-"

// dirStore keeps each object as a file under root, at the key's path.
type dirStore struct {
	root string // absolute, clean, no trailing '/'
	max  int64
}

func openDir(u *url.URL, opts Options) (Store, error) {
	var errs []error
	if u.Host != "" && u.Host != "localhost" {
		errs = append(errs, fmt.Errorf("host %q: a file URL names a local directory (file:///abs/dir)", u.Host))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		errs = append(errs, errors.New("no user, query or fragment in a file URL"))
	}
	if !filepath.IsAbs(u.Path) {
		errs = append(errs, fmt.Errorf("path %q is not absolute", u.Path))
	}
	if err := urlErrors(u, errs); err != nil {
		return nil, err
	}
	root := filepath.Clean(u.Path)
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", u.Redacted(), err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("objstore: open %s: not a directory", u.Redacted())
	}
	return &dirStore{root: strings.TrimSuffix(root, "/"), max: cmp.Or(opts.MaxSize, MaxSizeDefault)}, nil
}

func (d *dirStore) path(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
			return "", fmt.Errorf("%w %q: segment starts with %q, the directory store's temporary files", ErrBadKey, key, tempPrefix)
		}
	}
	return d.root + "/" + key, nil
}

func (d *dirStore) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	info, err := d.put(ctx, key, r, size, contentType)
	if err != nil {
		return Info{}, fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return info, nil
}

// put writes a temporary file beside the object, syncs it and renames it
// over the object, then syncs the directory: a reader sees the old object
// or the whole new one, and a crash leaves at most a temporary file.
func (d *dirStore) put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	path, err := d.path(key)
	if err != nil {
		return Info{}, err
	}
	if err := checkSize(size, d.max); err != nil {
		return Info{}, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Info{}, err
	}
	tmp, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return Info{}, err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	m := newMeter(ctx, r, size, d.max)
	if _, err := io.Copy(tmp, m); err != nil {
		if m.err != nil {
			return Info{}, m.err
		}
		return Info{}, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return Info{}, err
	}
	if err := tmp.Sync(); err != nil {
		return Info{}, err
	}
	if err := tmp.Close(); err != nil {
		return Info{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Info{}, err
	}
	done = true
	if err := syncDir(dir); err != nil {
		return Info{}, fmt.Errorf("stored, but syncing its directory: %w", err)
	}
	return m.info(key, contentType), nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (d *dirStore) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	path, err := d.path(key)
	if err != nil {
		return nil, Info{}, fmt.Errorf("objstore: get: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, Info{}, fmt.Errorf("objstore: get %s: %w", key, notFound(err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = ErrNotFound // a directory holding longer keys
	}
	if err != nil {
		_ = f.Close()
		return nil, Info{}, fmt.Errorf("objstore: get %s: %w", key, err)
	}
	return f, Info{Key: key, Size: fi.Size()}, nil
}

func (d *dirStore) Stat(ctx context.Context, key string) (Info, error) {
	path, err := d.path(key)
	if err != nil {
		return Info{}, fmt.Errorf("objstore: stat: %w", err)
	}
	fi, err := os.Stat(path)
	if err == nil && !fi.Mode().IsRegular() {
		err = ErrNotFound
	}
	if err != nil {
		return Info{}, fmt.Errorf("objstore: stat %s: %w", key, notFound(err))
	}
	return Info{Key: key, Size: fi.Size()}, nil
}

func (d *dirStore) Delete(ctx context.Context, key string) error {
	path, err := d.path(key)
	if err != nil {
		return fmt.Errorf("objstore: delete: %w", err)
	}
	fi, err := os.Lstat(path)
	if err == nil && fi.IsDir() {
		return nil // no object here, only longer keys
	}
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil && !errors.Is(notFound(err), ErrNotFound) {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return nil
}

// notFound maps the errors of a missing file, or of a path through a file
// ("a/b" where "a" is an object), to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	return err
}

func (d *dirStore) URL(key string) string {
	return (&url.URL{Scheme: "file", Path: d.root + "/" + key}).String()
}

func (d *dirStore) Key(objectURL string) (string, error) {
	u, err := parseURL(objectURL)
	if err != nil {
		return "", err
	}
	key, ok := strings.CutPrefix(u.Path, d.root+"/")
	if u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || !ok {
		return "", fmt.Errorf("%w: %s is not under %s", ErrOtherStore, u.Redacted(), d.URL(""))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w %s: no user, query or fragment in a file URL", ErrBadURL, u.Redacted())
	}
	if _, err := d.path(key); err != nil {
		return "", err
	}
	return key, nil
}
