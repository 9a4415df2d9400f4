package httpapi

import (
	"bufio"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/eisland/isle/internal/correlation"
	"github.com/eisland/isle/internal/objstore"
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

// uploadLimits are seed 000's DB 7 limits: 3 avatars an hour per client IP
// and per account, 5 wallpapers an hour per user.
func (s *Server) uploadLimits() []Limit {
	kind := func(r *http.Request) string { return r.URL.Query().Get("kind") }
	return []Limit{
		{Name: "avatar-upload-ip", Kind: FixedWindow, Family: keys.AvatarUploadIP, Max: 3, Per: keys.AvatarUploadIP.TTL,
			Key: func(r *http.Request, _ Principal) ([]string, bool) {
				return []string{s.clientIP(r)}, kind(r) == store.KindAvatar
			}},
		{Name: "avatar-upload-account", Kind: FixedWindow, Family: keys.AvatarUploadUser, Max: 3, Per: keys.AvatarUploadUser.TTL,
			Key: func(r *http.Request, p Principal) ([]string, bool) {
				return []string{p.Subject}, kind(r) == store.KindAvatar
			}},
		{Name: "wallpaper-upload", Kind: FixedWindow, Family: keys.WallpaperUpload, Max: 5, Per: keys.WallpaperUpload.TTL,
			Key: func(r *http.Request, p Principal) ([]string, bool) {
				return []string{p.Subject}, kind(r) == store.KindWallpaper
			}},
	}
}

type objectAnswer struct {
	ID          uint64  `json:"id"`
	Kind        string  `json:"kind"`
	Key         string  `json:"key"`
	ContentType string  `json:"contentType"`
	SizeBytes   int64   `json:"sizeBytes"`
	SHA256      string  `json:"sha256"`
	SourceURL   string  `json:"sourceUrl"`
	ReplicaURL  *string `json:"replicaUrl"`
	Replication string  `json:"replication"` // queued, pending, done, failed
	Attempts    int     `json:"attempts"`
	LastError   *string `json:"lastError,omitempty"`
}

func answerObject(st store.ObjectState) objectAnswer {
	return objectAnswer{ID: st.ID, Kind: st.Kind, Key: st.ObjectKey, ContentType: st.ContentType, SizeBytes: st.SizeBytes,
		SHA256: st.SHA256, SourceURL: st.SourceURL, ReplicaURL: st.ReplicaURL, Replication: st.Replication,
		Attempts: st.Attempts, LastError: st.LastError}
}

// uploadObject stores the body as the caller's avatar or wallpaper in the
// source store, then writes its row and the outbox row that replicates it
// in one transaction (doc/objects.md). A refused upload stores nothing.
func (s *Server) uploadObject(w http.ResponseWriter, r *http.Request) error {
	if s.deps.Objects == nil {
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
	contentType := r.Header.Get("Content-Type")
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	if _, _, err := mime.ParseMediaType(contentType); err != nil || len(contentType) > 128 {
		return BadRequest("Content-Type: not a media type of at most 128 bytes")
	}
	if r.ContentLength > limit {
		return tooLarge(kind, limit)
	}
	body := bufio.NewReader(r.Body)
	if _, err := body.Peek(1); errors.Is(err, io.EOF) {
		return BadRequest("the body is empty: send the file")
	} else if err != nil {
		return uploadReadError(kind, limit, err)
	}
	info, err := objstore.WithMaxSize(s.deps.Objects, limit).Put(r.Context(), key, body, r.ContentLength, contentType)
	switch {
	case errors.Is(err, objstore.ErrTooLarge):
		return tooLarge(kind, limit)
	case errors.Is(err, objstore.ErrSizeMismatch):
		return BadRequest("the body's length differs from its Content-Length")
	case err != nil:
		return uploadReadError(kind, limit, err)
	}
	obj, err := store.NewObjects(s.deps.DB).Create(r.Context(), store.StoredObject{
		OwnerUsername: p.Subject, Kind: kind, ObjectKey: key, ContentType: contentType,
		SizeBytes: info.Size, SHA256: info.SHA256, SourceURL: s.deps.Objects.URL(key),
	}, correlation.RequestID(r.Context()))
	if err != nil {
		// No row points at the object: take it back, so nothing is left.
		if derr := s.deps.Objects.Delete(r.Context(), key); derr != nil {
			s.deps.Log.WarnContext(r.Context(), "an upload's row failed and its object could not be deleted", "key", key, "err", derr)
		}
		return Unavailable("objects", err)
	}
	w.Header().Set("Location", "/v1/objects/"+strconv.FormatUint(obj.ID, 10))
	return JSON(w, http.StatusCreated, answerObject(store.ObjectState{StoredObject: obj, Replication: "queued"}))
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

// getObject answers an object and its replication to its owner (and to
// admins); to anyone else it does not exist.
func (s *Server) getObject(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		return Errorf(http.StatusNotFound, CodeNotFound, "no object %q", chi.URLParam(r, "id"))
	}
	st, err := store.NewObjects(s.deps.DB).Get(r.Context(), id)
	p, _ := PrincipalFrom(r.Context())
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && st.OwnerUsername != p.Subject && p.Role != RoleAdmin:
		return Errorf(http.StatusNotFound, CodeNotFound, "no object %d", id)
	case err != nil:
		return Unavailable("objects", err)
	}
	return JSON(w, http.StatusOK, answerObject(st))
}
