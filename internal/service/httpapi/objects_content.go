package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/eisland/isle/internal/kit/objstore"
)

// objectContent streams an object's bytes from the source store to its
// owner (and admins): the one way clients read objects, whatever the
// store, so that no store URL, bucket or credential reaches them. The
// answer carries the type stored at upload (an image type, found from the
// bytes) and is never to be sniffed or run: nosniff, and a sandbox that
// lets no script run should a browser open it as a page. Its ETag is the
// object's SHA-256; objects never change under their key.
func (s *Server) objectContent(w http.ResponseWriter, r *http.Request) error {
	st, err := s.ownedObject(r)
	if err != nil {
		return err
	}
	if s.backends.Objects == nil {
		return Unavailable("objects", errors.New("no object store"))
	}
	etag := `"` + st.SHA256 + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	rc, info, err := s.backends.Objects.Get(r.Context(), st.ObjectKey)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		s.backends.Log.WarnContext(r.Context(), "an object's row has no object in the source store", "object", st.ID, "key", st.ObjectKey)
		return Errorf(http.StatusNotFound, CodeNotFound, "object %d: its content is gone", st.ID)
	case err != nil:
		return Unavailable("objects", err)
	}
	defer rc.Close()
	h.Set("Content-Type", st.ContentType)
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if d := mime.FormatMediaType("inline", map[string]string{"filename": path.Base(st.ObjectKey)}); d != "" {
		h.Set("Content-Disposition", d)
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		// The status is sent: the client sees a body shorter than its length.
		s.backends.Log.WarnContext(r.Context(), "an object's download broke off", "object", st.ID, "err", err)
	}
	return nil
}
