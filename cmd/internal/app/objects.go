package app

import (
	"fmt"
	"net/url"
	"os"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/objstore"
)

// makeFileDir makes the directory of a file:// URL when it is missing; other
// URLs are left alone.
func makeFileDir(rawURL string) error {
	if u, err := url.Parse(rawURL); err == nil && u.Scheme == "file" {
		return os.MkdirAll(u.Path, 0o750)
	}
	return nil
}

// OpenStore opens one object store (what names it in errors), taking
// objects of up to maxSize bytes and making a file:// store's directory.
func OpenStore(what string, s config.Store, maxSize int64) (objstore.Store, error) {
	if err := makeFileDir(s.URL); err != nil {
		return nil, fmt.Errorf("%s object store: %w", what, err)
	}
	st, err := objstore.Open(s.URL, s.Options(maxSize))
	if err != nil {
		return nil, fmt.Errorf("%s object store: %w", what, err)
	}
	return st, nil
}

// OpenMailer opens the worker's mailer, making the directory of a file://
// mailer when it is missing.
func OpenMailer(m config.Mail) (mail.Mailer, error) {
	u, err := url.Parse(m.URL)
	if err == nil {
		u.RawQuery = "" // file:///dir?from=...: the directory is the path
		err = makeFileDir(u.String())
	}
	if err != nil {
		return nil, fmt.Errorf("mailer: %w", err)
	}
	mailer, err := mail.Open(m.URL, mail.Options{Username: m.Username, Password: m.Password, APIKey: m.APIKey})
	if err != nil {
		return nil, fmt.Errorf("mailer: %w", err)
	}
	return mailer, nil
}
