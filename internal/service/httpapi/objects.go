package httpapi

import (
	"bufio"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// Upload limits of an object kind that Config sets none for.
const (
	AvatarMaxBytesDefault    = 5 << 20
	WallpaperMaxBytesDefault = 32 << 20
)

// objectKeyMax is stored_object.object_key's width.
const objectKeyMax = 255

// uploadLimits are the upload limits (doc/objects.md; keys in
// doc/keys.md, database 7): 3 avatars an hour per client IP (an IPv6
// client's /64: LimitAddress) and per account, 5 wallpapers an hour per user. They count the uploads
// the API takes: a refused one (400, 413, 415, 429, 503) is given back.
func (s *Server) uploadLimits() []Limit {
	kind := func(r *http.Request) string { return r.URL.Query().Get("kind") }
	return []Limit{
		{Name: "avatar-upload-ip", Kind: FixedWindow, Family: keys.AvatarUploadIP, Max: 3, Per: keys.AvatarUploadIP.TTL,
			Key: func(r *http.Request, _ Principal) ([]string, bool) {
				return []string{s.limitAddress(r)}, kind(r) == store.KindAvatar
			}, OnlyAccepted: true},
		{Name: "avatar-upload-account", Kind: FixedWindow, Family: keys.AvatarUploadUser, Max: 3, Per: keys.AvatarUploadUser.TTL,
			Key: func(r *http.Request, p Principal) ([]string, bool) {
				return []string{p.Subject}, kind(r) == store.KindAvatar
			}, OnlyAccepted: true},
		{Name: "wallpaper-upload", Kind: FixedWindow, Family: keys.WallpaperUpload, Max: 5, Per: keys.WallpaperUpload.TTL,
			Key: func(r *http.Request, p Principal) ([]string, bool) {
				return []string{p.Subject}, kind(r) == store.KindWallpaper
			}, OnlyAccepted: true},
	}
}

// kindTypes are the image types each kind takes, as their bytes show
// them (internal/kit/images): an avatar may move (GIF); a wallpaper is a still
// picture, often large, for which a GIF's 256 colours do not do. Nothing
// a browser runs (HTML, SVG) is ever an object.
var kindTypes = map[string][]string{
	store.KindAvatar:    {images.PNG, images.JPEG, images.WebP, images.GIF},
	store.KindWallpaper: {images.PNG, images.JPEG, images.WebP},
}

// objectAnswer is an object as the API answers it. Where the stores keep
// it (their URLs name the server's directories, or a bucket and its
// endpoint) and the replication's last error (which names them too) are
// for admins only; the owner gets the key and ContentURL.
type objectAnswer struct {
	ID          uint64 `json:"id"`
	Kind        string `json:"kind"`
	Key         string `json:"key"`
	ContentType string `json:"contentType"`
	SizeBytes   int64  `json:"sizeBytes"`
	SHA256      string `json:"sha256"`
	ContentURL  string `json:"contentUrl"`  // the download, through the API
	Replication string `json:"replication"` // queued, pending, done, failed
	Attempts    int    `json:"attempts"`

	SourceURL  string  `json:"sourceUrl,omitempty"`  // admins only
	ReplicaURL *string `json:"replicaUrl,omitempty"` // admins only; set once replicated
	LastError  *string `json:"lastError,omitempty"`  // admins only
}

func answerObject(st store.ObjectState, admin bool) objectAnswer {
	a := objectAnswer{ID: st.ID, Kind: st.Kind, Key: st.ObjectKey, ContentType: st.ContentType, SizeBytes: st.SizeBytes,
		SHA256: st.SHA256, ContentURL: contentPath(st.ID), Replication: st.Replication, Attempts: st.Attempts}
	if admin {
		a.SourceURL, a.ReplicaURL, a.LastError = st.SourceURL, st.ReplicaURL, st.LastError
	}
	return a
}

// contentPath is where an object's bytes are downloaded (objectContent).
func contentPath(id uint64) string { return "/v1/objects/" + strconv.FormatUint(id, 10) + "/content" }

// uploadObject stores the body as the caller's avatar or wallpaper in the
// source store, then writes its row and the outbox row that replicates it
// in one transaction (doc/objects.md). The body must be an image of one of
// the kind's types, by its first bytes; that type is the one stored. A
// refused upload stores nothing.
func (s *Server) uploadObject(w http.ResponseWriter, r *http.Request) error {
	if s.backends.Objects == nil {
		return Unavailable("objects", errors.New("no object store"))
	}
	p, _ := PrincipalFrom(r.Context())
	q := r.URL.Query()
	kind := q.Get("kind")
	limit := map[string]int64{store.KindAvatar: s.cfg.AvatarMaxBytes, store.KindWallpaper: s.cfg.WallpaperMaxBytes}[kind]
	if limit == 0 {
		return BadRequest("kind: avatar or wallpaper")
	}
	name := q.Get("name")
	if name == "" {
		name = kind
	}
	if strings.Contains(name, "/") {
		return BadRequest("name: one path segment, without /")
	}
	key := kind + "/" + p.Subject + "/" + uuid.NewString() + "/" + name
	if err := objstore.ValidKey(key); err != nil {
		return BadRequest("name: %v", err)
	}
	if len(key) > objectKeyMax {
		return BadRequest("name: the object key %q would be %d bytes, more than %d", key, len(key), objectKeyMax)
	}
	if err := declaredType(r.Header.Get("Content-Type"), kind); err != nil {
		return err
	}
	if r.ContentLength > limit {
		return tooLarge(kind, limit)
	}
	body := bufio.NewReaderSize(r.Body, images.SniffLen)
	head, err := body.Peek(images.SniffLen)
	switch {
	case len(head) == 0 && errors.Is(err, io.EOF):
		return BadRequest("the body is empty: send the file")
	case err != nil && !errors.Is(err, io.EOF):
		return uploadReadError(kind, limit, err)
	}
	contentType := images.Sniff(head)
	if !slices.Contains(kindTypes[kind], contentType) {
		return Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "the body is not an image a %s may be (%s), by its first bytes",
			kind, strings.Join(kindTypes[kind], ", "))
	}
	if !images.NameFits(name, contentType) {
		return BadRequest("name: %q ends in an extension that is not one of %s's (%s), which the body is",
			name, contentType, strings.Join(images.Extensions(contentType), ", "))
	}
	info, err := objstore.WithMaxSize(s.backends.Objects, limit).Put(r.Context(), key, body, r.ContentLength, contentType)
	switch {
	case errors.Is(err, objstore.ErrTooLarge):
		return tooLarge(kind, limit)
	case errors.Is(err, objstore.ErrSizeMismatch):
		return BadRequest("the body's length differs from its Content-Length")
	case errors.Is(err, objstore.ErrBadKey): // a name a store keeps for itself
		return BadRequest("name: %q is a name the object store keeps for itself", name)
	case err != nil:
		return uploadReadError(kind, limit, err)
	}
	obj, err := store.NewObjects(s.backends.DB).Create(r.Context(), store.StoredObject{
		OwnerUsername: p.Subject, Kind: kind, ObjectKey: key, ContentType: contentType,
		SizeBytes: info.Size, SHA256: info.SHA256, SourceURL: s.backends.Objects.URL(key),
	}, correlation.RequestID(r.Context()))
	if err != nil {
		// No row points at the object: take it back, so nothing is left.
		if derr := s.backends.Objects.Delete(r.Context(), key); derr != nil {
			s.backends.Log.WarnContext(r.Context(), "an upload's row failed and its object could not be deleted", "key", key, "err", derr)
		}
		return Unavailable("objects", err)
	}
	w.Header().Set("Location", "/v1/objects/"+strconv.FormatUint(obj.ID, 10))
	return JSON(w, http.StatusCreated, answerObject(store.ObjectState{StoredObject: obj, Replication: "queued"}, p.Role == RoleAdmin))
}

// declaredType checks the Content-Type a client sent: none, or
// application/octet-stream, leaves the type to the body's bytes; any other
// must be a type the kind takes (415). Either way the bytes decide the
// type stored.
func declaredType(header, kind string) error {
	if header == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil || len(header) > 128 {
		return BadRequest("Content-Type: not a media type of at most 128 bytes")
	}
	if mt != "application/octet-stream" && !slices.Contains(kindTypes[kind], mt) {
		return Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type: a %s is one of %s, not %s",
			kind, strings.Join(kindTypes[kind], ", "), mt)
	}
	return nil
}

// uploadReadError tells a body over the route's limit, or one the client
// stopped sending, from a store that failed.
func uploadReadError(kind string, limit int64, err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(kind, limit)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return BadRequest("the body ended early")
	}
	return Unavailable("objects", err)
}

func tooLarge(kind string, limit int64) error {
	return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "a %s is at most %d bytes", kind, limit)
}

// ownedObject reads the object of the route's {id} for its owner (and
// admins); to anyone else it does not exist.
func (s *Server) ownedObject(r *http.Request) (store.ObjectState, error) {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		return store.ObjectState{}, Errorf(http.StatusNotFound, CodeNotFound, "no object %q", chi.URLParam(r, "id"))
	}
	st, err := store.NewObjects(s.backends.DB).Get(r.Context(), id)
	p, _ := PrincipalFrom(r.Context())
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && st.OwnerUsername != p.Subject && p.Role != RoleAdmin:
		return store.ObjectState{}, Errorf(http.StatusNotFound, CodeNotFound, "no object %d", id)
	case err != nil:
		return store.ObjectState{}, Unavailable("objects", err)
	}
	return st, nil
}

// getObject answers an object and its replication to its owner (and to
// admins, with where the stores keep it).
func (s *Server) getObject(w http.ResponseWriter, r *http.Request) error {
	st, err := s.ownedObject(r)
	if err != nil {
		return err
	}
	p, _ := PrincipalFrom(r.Context())
	return JSON(w, http.StatusOK, answerObject(st, p.Role == RoleAdmin))
}
