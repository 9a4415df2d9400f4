package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

// upload sends body as a file; chunked hides its length from the server.
func (b *testBundle) upload(t *testing.T, token, query string, body []byte, chunked bool) (int, map[string]any) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // not a *bytes.Reader: the client cannot tell the length
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.http.URL+"/v1/objects?"+query, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "image/png")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// uploadWith sends body as a PNG with extra headers (name, value pairs).
func (b *testBundle) uploadWith(t *testing.T, token, query string, body []byte, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.http.URL+"/v1/objects?"+query, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "image/png")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// storedFiles lists every file under the source store's directory.
func (b *testBundle) storedFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(b.objDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	}))
	return out
}

func TestUploadStoresTheObjectAndItsOutboxRowTogether(t *testing.T) {
	b := setup(t, options{})
	ann := b.token(t, "ann", httpapi.RoleUser)
	pic := images.SamplePNG(13000, 1)
	sum := sha256.Sum256(pic)

	status, body := b.upload(t, ann, "kind=avatar&name=me.png", pic, false)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Equal(t, hex.EncodeToString(sum[:]), body["sha256"])
	require.EqualValues(t, len(pic), body["sizeBytes"])
	require.Equal(t, "queued", body["replication"])
	require.Nil(t, body["replicaUrl"])
	key := body["key"].(string)
	require.True(t, strings.HasPrefix(key, "avatar/ann/") && strings.HasSuffix(key, "/me.png"), key)
	_, _, asAdmin := b.do(t, http.MethodGet, "/v1/objects/"+jsonID(body["id"]), b.token(t, "ops", httpapi.RoleAdmin), "")
	require.Equal(t, b.objects.URL(key), asAdmin["sourceUrl"], "admins see where it is kept")

	rc, _, err := b.objects.Get(t.Context(), key)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	require.Equal(t, pic, got)

	var outbox []store.ObjectOutbox
	require.NoError(t, b.db.Find(&outbox).Error)
	require.Len(t, outbox, 1)
	require.EqualValues(t, body["id"], outbox[0].ObjectID)
	require.Equal(t, store.PriorityAvatar, outbox[0].Priority)

	// A wallpaper of unknown length goes with the low priority.
	status, body = b.upload(t, ann, "kind=wallpaper", images.SamplePNG(100, 2), true)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.NoError(t, b.db.Order("id").Find(&outbox).Error)
	require.Len(t, outbox, 2)
	require.Equal(t, store.PriorityWallpaper, outbox[1].Priority)

	// Its owner sees it; another user does not.
	path := "/v1/objects/" + jsonID(body["id"])
	status, _, got2 := b.do(t, http.MethodGet, path, ann, "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "queued", got2["replication"])
	status, _, _ = b.do(t, http.MethodGet, path, b.token(t, "bea", httpapi.RoleUser), "")
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = b.do(t, http.MethodGet, "/v1/objects/999999", ann, "")
	require.Equal(t, http.StatusNotFound, status)
}

func jsonID(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRefusedUploadsStoreNothing(t *testing.T) {
	b := setup(t, options{avatarMax: 1000, wallMax: 1000})
	for i, c := range []struct {
		query   string
		body    []byte
		chunked bool
		status  int
	}{
		// Wallpapers mostly: their limit is per user, the avatars' per IP too.
		{"kind=wallpaper", nil, false, http.StatusBadRequest},
		{"kind=wallpaper", nil, true, http.StatusBadRequest},
		{"kind=avatar", images.SamplePNG(1001, 1), false, http.StatusRequestEntityTooLarge},
		{"kind=avatar", images.SamplePNG(5000, 2), true, http.StatusRequestEntityTooLarge},
		{"kind=wallpaper", images.SamplePNG(1001, 3), true, http.StatusRequestEntityTooLarge},
		{"kind=wallpaper&name=..", []byte("x"), false, http.StatusBadRequest},
		{"kind=wallpaper&name=a%00b", []byte("x"), false, http.StatusBadRequest},
		{"kind=wallpaper&name=a%2Fb", []byte("x"), false, http.StatusBadRequest},
		{"kind=wallpaper&name=%ff", []byte("x"), false, http.StatusBadRequest},
		{"kind=wallpaper&name=" + strings.Repeat("n", 250), []byte("x"), false, http.StatusBadRequest},
		{"kind=poster", []byte("x"), false, http.StatusBadRequest},
	} {
		// A user per case: the avatar limits (3 an hour) are not what is tested.
		tok := b.token(t, "user"+string(rune('a'+i)), httpapi.RoleUser)
		status, body := b.upload(t, tok, c.query, c.body, c.chunked)
		require.Equal(t, c.status, status, "%s (%d bytes, chunked %v): %v", c.query, len(c.body), c.chunked, body)
	}
	require.Empty(t, b.storedFiles(t), "a refused upload left a file")
	var n int64
	require.NoError(t, b.db.Model(&store.StoredObject{}).Count(&n).Error)
	require.Zero(t, n)
	require.NoError(t, b.db.Model(&store.ObjectOutbox{}).Count(&n).Error)
	require.Zero(t, n)
}

func TestAvatarUploadsAreLimitedPerAccount(t *testing.T) {
	b := setup(t, options{})
	tok := b.token(t, "cal", httpapi.RoleUser)
	for i := range 3 {
		status, body := b.upload(t, tok, "kind=avatar", images.SamplePNG(100, uint64(i)), false)
		require.Equal(t, http.StatusCreated, status, "%v", body)
	}
	status, body := b.upload(t, tok, "kind=avatar", images.SamplePNG(100, 3), false)
	require.Equal(t, http.StatusTooManyRequests, status, "%v", body)
	status, body = b.upload(t, tok, "kind=wallpaper", images.SamplePNG(100, 4), false)
	require.Equal(t, http.StatusCreated, status, "wallpapers have their own limit: %v", body)
}
