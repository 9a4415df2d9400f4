package config

import (
	"errors"
	"net/url"
	"strings"

	"github.com/eisland/isle/internal/kit/objstore"
)

// Objects is where objects are kept (doc/objects.md): the source store
// uploads go to, the replica store the replication consumer copies them
// to, and the store of identity material.
type Objects struct {
	Source   Store
	Target   Store
	Identity Store

	AvatarMaxBytes    int64
	WallpaperMaxBytes int64
}

// Store is one object store: its URL and credentials.
type Store struct {
	URL       string
	AccessKey string
	SecretKey string
}

// Options are s's objstore options, with the largest object it takes.
func (s Store) Options(maxSize int64) objstore.Options {
	return objstore.Options{MaxSize: maxSize, AccessKey: s.AccessKey, SecretKey: s.SecretKey}
}

// MaxBytes is the largest object of any kind.
func (o Objects) MaxBytes() int64 { return max(o.AvatarMaxBytes, o.WallpaperMaxBytes) }

// The default stores: directories, made on start when missing.
const (
	ObjectSourceDefault   = "file:///var/tmp/isle/objects/source"
	ObjectTargetDefault   = "file:///var/tmp/isle/objects/replica"
	ObjectIdentityDefault = "file:///var/tmp/isle/objects/identity"
)

func loadObjects(l *loader) Objects {
	storeURL := func(name, def, doc string) string {
		v := l.String(name, def, doc+" A file:///absolute/dir URL (made when missing) or s3://bucket?endpoint=host:port&region=r&secure=true (doc/objects.md).")
		if err := checkStoreURL(v); err != nil {
			l.failf(name, v, "%v", err)
			return def
		}
		return v
	}
	o := Objects{
		Source: Store{
			URL:       storeURL("OBJECT_STORE_SOURCE_URL", ObjectSourceDefault, "Where uploaded objects are stored (stored_object.source_url)."),
			AccessKey: l.Secret("OBJECT_STORE_ACCESS_KEY", "", "Access key of the source store, when it is S3."),
			SecretKey: l.Secret("OBJECT_STORE_SECRET_KEY", "", "Secret key of the source store, when it is S3."),
		},
		Target: Store{
			URL: storeURL("OBJECT_REPLICATION_TARGET_URL", ObjectTargetDefault,
				"Where the replication consumer copies objects (stored_object.replica_url)."),
			AccessKey: l.Secret("OBJECT_REPLICATION_TARGET_ACCESS_KEY", "", "Access key of the replica store, when it is S3; empty: OBJECT_STORE_ACCESS_KEY."),
			SecretKey: l.Secret("OBJECT_REPLICATION_TARGET_SECRET_KEY", "", "Secret key of the replica store, when it is S3; empty: OBJECT_STORE_SECRET_KEY."),
		},
		Identity: Store{
			URL: storeURL("IDENTITY_MATERIAL_STORE_URL", ObjectIdentityDefault,
				"Where the identity-material consumer stores verification material (identity_verification.material_info_url)."),
			AccessKey: l.Secret("IDENTITY_MATERIAL_STORE_ACCESS_KEY", "", "Access key of the identity material store, when it is S3; empty: OBJECT_STORE_ACCESS_KEY."),
			SecretKey: l.Secret("IDENTITY_MATERIAL_STORE_SECRET_KEY", "", "Secret key of the identity material store, when it is S3; empty: OBJECT_STORE_SECRET_KEY."),
		},
		AvatarMaxBytes: int64(l.Int("OBJECT_AVATAR_MAX_BYTES", 5<<20, 1, objstore.MaxSizeDefault,
			"Largest avatar upload (413 above it).")),
		WallpaperMaxBytes: int64(l.Int("OBJECT_WALLPAPER_MAX_BYTES", 32<<20, 1, objstore.MaxSizeDefault,
			"Largest wallpaper upload (413 above it).")),
	}
	for _, s := range []*Store{&o.Target, &o.Identity} {
		if s.AccessKey == "" && s.SecretKey == "" {
			s.AccessKey, s.SecretKey = o.Source.AccessKey, o.Source.SecretKey
		}
	}
	// An S3 store is checked with its keys, which come after its URL.
	for _, s := range []struct {
		name string
		st   Store
	}{{"OBJECT_STORE_SOURCE_URL", o.Source}, {"OBJECT_REPLICATION_TARGET_URL", o.Target}, {"IDENTITY_MATERIAL_STORE_URL", o.Identity}} {
		if strings.HasPrefix(s.st.URL, "s3:") {
			if _, err := objstore.Open(s.st.URL, s.st.Options(0)); err != nil { // no I/O: it checks the URL and the keys
				l.failf(s.name, s.st.URL, "%v", err)
			}
		}
	}
	return o
}

// checkStoreURL refuses what objstore.Open would, without opening it.
func checkStoreURL(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return errors.New("not a URL")
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" || u.Path[0] != '/' || u.Host != "" {
			return errors.New("want file:///absolute/dir")
		}
		return nil
	case "s3":
		return nil // checked with its keys once they are read
	}
	return errors.New("want a file:// or s3:// URL")
}
