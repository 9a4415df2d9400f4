package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/gif"
	"image/jpeg"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

// get sends a GET and returns the status, headers and raw body.
func (b *testBundle) get(t *testing.T, path, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.http.URL+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, raw
}

// postRaw uploads body with the given Content-Type ("" for none) and
// returns the status and raw answer.
func (b *testBundle) postRaw(t *testing.T, token, query, ctype string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.http.URL+"/v1/objects?"+query, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// A client never sees where the server keeps its objects (a
// file:// URL names the server's directory, an s3:// one its bucket and
// endpoint). It gets the key and a download through the API; admins see
// the store URLs.
func TestObjectAnswersCarryNoStoreURLs(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ann := b.token(t, "ann", httpapi.RoleUser)
	pic := images.SamplePNG(3000, 1)

	status, raw := b.postRaw(t, ann, "kind=avatar&name=me.png", "image/png", pic)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	for _, leak := range []string{"sourceUrl", "replicaUrl", "file:", b.objDir} {
		require.NotContains(t, string(raw), leak, "the upload's answer")
	}
	id := jsonField(t, raw, "id")
	status, _, raw = b.get(t, "/v1/objects/"+id, ann)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	for _, leak := range []string{"sourceUrl", "replicaUrl", "file:", b.objDir} {
		require.NotContains(t, string(raw), leak, "the owner's answer")
	}
	require.Equal(t, "/v1/objects/"+id+"/content", jsonField(t, raw, "contentUrl"))

	// Admins see where it is kept.
	status, _, raw = b.get(t, "/v1/objects/"+id, b.token(t, "ops", httpapi.RoleAdmin))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	key := jsonField(t, raw, "key")
	require.Equal(t, b.objects.URL(key), jsonField(t, raw, "sourceUrl"))

	// The owner (and admins) download it through the API, typed as stored
	// and never sniffed; anyone else gets 404.
	for _, who := range []string{ann, b.token(t, "ops", httpapi.RoleAdmin)} {
		status, h, got := b.get(t, "/v1/objects/"+id+"/content", who)
		require.Equal(t, http.StatusOK, status, "%s", got)
		require.Equal(t, pic, got)
		require.Equal(t, "image/png", h.Get("Content-Type"))
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	}
	status, _, _ = b.get(t, "/v1/objects/"+id+"/content", b.token(t, "bea", httpapi.RoleUser))
	require.Equal(t, http.StatusNotFound, status)
}

// jsonField is one top-level field of a JSON object, as text.
func jsonField(t *testing.T, raw []byte, name string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	v, ok := m[name]
	require.True(t, ok, "no %q in %s", name, raw)
	if s, ok := v.(string); ok {
		return s
	}
	return jsonID(v)
}

func encodeImage(t *testing.T, enc func(io.Writer, image.Image) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, enc(&buf, image.NewGray(image.Rect(0, 0, 4, 4))))
	return buf.Bytes()
}

// The bytes decide what an upload is, not the client's
// Content-Type: each kind takes its image types only, stored with the type
// its bytes show, and served with nosniff.
func TestUploadsMustBeImagesOfTheirKind(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	jpg := encodeImage(t, func(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, nil) })
	gf := encodeImage(t, func(w io.Writer, m image.Image) error { return gif.Encode(w, m, nil) })
	page := []byte("<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>")
	n := 0
	send := func(query, ctype string, body []byte) (int, []byte) {
		n++ // a user per upload: the upload limits are not what is tested
		return b.postRaw(t, b.token(t, "u"+strconv.Itoa(n), httpapi.RoleUser), query, ctype, body)
	}
	for _, c := range []struct {
		name, query, ctype string
		body               []byte
		status             int
		stored             string // the content type kept, when accepted
	}{
		{"a page as a wallpaper", "kind=wallpaper&name=x.html", "text/html", page, http.StatusUnsupportedMediaType, ""},
		{"a page said to be a PNG", "kind=wallpaper&name=x.png", "image/png", page, http.StatusUnsupportedMediaType, ""},
		{"an SVG avatar", "kind=avatar&name=x.svg", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), http.StatusUnsupportedMediaType, ""},
		{"a PNG said to be a page", "kind=wallpaper&name=x.png", "text/html", images.SamplePNG(200, 1), http.StatusUnsupportedMediaType, ""},
		{"a PNG named .html", "kind=wallpaper&name=x.html", "image/png", images.SamplePNG(200, 2), http.StatusBadRequest, ""},
		{"a GIF wallpaper", "kind=wallpaper&name=w.gif", "image/gif", gf, http.StatusUnsupportedMediaType, ""},
		{"a PNG", "kind=wallpaper&name=w.png", "image/png", images.SamplePNG(200, 3), http.StatusCreated, "image/png"},
		{"a JPEG said to be a PNG", "kind=avatar&name=a.jpg", "image/png", jpg, http.StatusCreated, "image/jpeg"},
		{"a JPEG of no stated type", "kind=wallpaper", "", jpg, http.StatusCreated, "image/jpeg"},
		{"a JPEG as octet-stream", "kind=wallpaper&name=w.jpeg", "application/octet-stream", jpg, http.StatusCreated, "image/jpeg"},
		{"a GIF avatar", "kind=avatar&name=a.gif", "image/gif; charset=binary", gf, http.StatusCreated, "image/gif"},
	} {
		status, raw := send(c.query, c.ctype, c.body)
		require.Equal(t, c.status, status, "%s: %s", c.name, raw)
		if c.stored == "" {
			continue
		}
		require.Equal(t, c.stored, jsonField(t, raw, "contentType"), c.name)
		var obj store.StoredObject
		require.NoError(t, b.db.First(&obj, jsonField(t, raw, "id")).Error)
		require.Equal(t, c.stored, obj.ContentType, c.name)
	}
	var pages int64
	require.NoError(t, b.db.Model(&store.StoredObject{}).Where("content_type NOT LIKE 'image/%' OR object_key LIKE '%.html'").Count(&pages).Error)
	require.Zero(t, pages)
	for _, f := range b.storedFiles(t) {
		require.False(t, strings.HasSuffix(f, ".html") || strings.HasSuffix(f, ".svg"), f)
	}
}

// A name the directory store keeps for its temporary files is the
// client's mistake (400), not the store's (503).
func TestUploadNamedWithTheTempPrefixIs400(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	status, raw := b.postRaw(t, b.token(t, "tim", httpapi.RoleUser), "kind=wallpaper&name=.objstore-tmp-1.png", "image/png", images.SamplePNG(100, 1))
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	require.Empty(t, b.storedFiles(t))
}

// The hourly upload limits count the uploads the API took, not
// the ones it refused (400, 413, 415).
func TestRefusedUploadsUseNoQuota(t *testing.T) {
	t.Parallel()
	b := setup(t, options{avatarMax: 1000, wallMax: 1000})
	tok := b.token(t, "rex", httpapi.RoleUser)
	refused := []struct {
		query, ctype string
		body         []byte
		status       int
	}{
		{"kind=avatar", "image/png", nil, http.StatusBadRequest},
		{"kind=avatar&name=a%2Fb", "image/png", images.SamplePNG(100, 1), http.StatusBadRequest},
		{"kind=avatar&name=.objstore-tmp-x", "image/png", images.SamplePNG(100, 1), http.StatusBadRequest},
		{"kind=avatar", "image/png", images.SamplePNG(1001, 1), http.StatusRequestEntityTooLarge},
		{"kind=avatar", "text/html", []byte("<html><script>alert(1)</script></html>"), http.StatusUnsupportedMediaType},
		{"kind=wallpaper", "image/png", images.SamplePNG(1001, 1), http.StatusRequestEntityTooLarge},
		{"kind=wallpaper", "image/png", []byte("not really a png"), http.StatusUnsupportedMediaType},
	}
	for range 2 { // more refusals than either limit allows uploads
		for _, c := range refused {
			status, raw := b.postRaw(t, tok, c.query, c.ctype, c.body)
			require.Equal(t, c.status, status, "%s: %s", c.query, raw)
		}
	}
	for i := range 3 {
		status, raw := b.postRaw(t, tok, "kind=avatar&name=a.png", "image/png", images.SamplePNG(100, uint64(i)))
		require.Equal(t, http.StatusCreated, status, "avatar %d: %s", i, raw)
	}
	status, raw := b.postRaw(t, tok, "kind=avatar&name=a.png", "image/png", images.SamplePNG(100, 9))
	require.Equal(t, http.StatusTooManyRequests, status, "the 4th avatar: %s", raw)
	for i := range 5 {
		status, raw := b.postRaw(t, tok, "kind=wallpaper&name=w.png", "image/png", images.SamplePNG(100, uint64(i)))
		require.Equal(t, http.StatusCreated, status, "wallpaper %d: %s", i, raw)
	}
	status, raw = b.postRaw(t, tok, "kind=wallpaper&name=w.png", "image/png", images.SamplePNG(100, 9))
	require.Equal(t, http.StatusTooManyRequests, status, "the 6th wallpaper: %s", raw)
}
