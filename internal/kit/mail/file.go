package mail

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
)

// fileMailer writes each message as <dir>/<IdempotencyKey>.eml: the
// development mailer, whose output any mail client opens.
type fileMailer struct {
	dir  string
	from *mail.Address
	opts Options
}

func openFile(u *url.URL, opts Options) (Mailer, error) {
	from, _, errs := urlParams(u)
	if u.Host != "" && u.Host != "localhost" {
		errs = append(errs, fmt.Errorf("host %q: a file URL names a local directory (file:///abs/dir)", u.Host))
	}
	if !filepath.IsAbs(u.Path) {
		errs = append(errs, fmt.Errorf("path %q is not absolute", u.Path))
	}
	if err := urlErrors(u, errs); err != nil {
		return nil, err
	}
	dir := filepath.Clean(u.Path)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("mail: open %s: %w", u.Redacted(), err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("mail: open %s: not a directory", u.Redacted())
	}
	return &fileMailer{dir: dir, from: from, opts: opts}, nil
}

// Send writes m to a temporary file and renames it over <key>.eml, so a
// redelivery replaces the file and a reader never sees half a message.
// File system errors are temporary (a full disk may clear).
func (f *fileMailer) Send(ctx context.Context, m Message) error {
	if err := m.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mail: file %s: %w", m.IdempotencyKey, err)
	}
	msg, err := buildMsg(f.from, m, f.opts.Now())
	if err != nil {
		return fmt.Errorf("mail: file %s: %w", m.IdempotencyKey, err)
	}
	tmp, err := os.CreateTemp(f.dir, ".mail-tmp-*")
	if err != nil {
		return fmt.Errorf("mail: file %s: %w", m.IdempotencyKey, err)
	}
	_, err = msg.WriteTo(tmp)
	err = errors.Join(err, tmp.Close())
	if err == nil {
		// CreateTemp makes 0600; a catcher in another account may read.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(f.dir, m.IdempotencyKey+".eml"))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("mail: file %s: %w", m.IdempotencyKey, err)
	}
	return nil
}
