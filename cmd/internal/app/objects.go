package app

import (
	"fmt"
	"net/url"
	"os"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/mail"
	"github.com/eisland/isle/internal/objstore"
)

// Stores are the object stores of config.Objects, open.
type Stores struct {
	Source, Target, Identity objstore.Store
}

// OpenStores opens the object stores, making the directory of a file://
// store when it is missing.
func OpenStores(o config.Objects) (Stores, error) {
	maxSize := max(o.AvatarMaxBytes, o.WallpaperMaxBytes)
	open := func(what string, s config.Store) (objstore.Store, error) {
		if u, err := url.Parse(s.URL); err == nil && u.Scheme == "file" {
			if err := os.MkdirAll(u.Path, 0o750); err != nil {
				return nil, fmt.Errorf("%s object store: %w", what, err)
			}
		}
		st, err := objstore.Open(s.URL, s.Options(maxSize))
		if err != nil {
			return nil, fmt.Errorf("%s object store: %w", what, err)
		}
		return st, nil
	}
	var (
		out Stores
		err error
	)
	if out.Source, err = open("source", o.Source); err != nil {
		return Stores{}, err
	}
	if out.Target, err = open("replica", o.Target); err != nil {
		return Stores{}, err
	}
	if out.Identity, err = open("identity material", o.Identity); err != nil {
		return Stores{}, err
	}
	return out, nil
}

// OpenMailer opens the worker's mailer, making the directory of a file://
// mailer when it is missing.
func OpenMailer(m config.Mail) (mail.Mailer, error) {
	if u, err := url.Parse(m.URL); err == nil && u.Scheme == "file" {
		if err := os.MkdirAll(u.Path, 0o750); err != nil {
			return nil, fmt.Errorf("mailer: %w", err)
		}
	}
	mailer, err := mail.Open(m.URL, mail.Options{Username: m.Username, Password: m.Password, APIKey: m.APIKey})
	if err != nil {
		return nil, fmt.Errorf("mailer: %w", err)
	}
	return mailer, nil
}
