package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

type objectAnswer struct {
	ID          uint64  `json:"id"`
	Kind        string  `json:"kind"`
	Key         string  `json:"key"`
	SourceURL   string  `json:"sourceUrl"`
	ReplicaURL  *string `json:"replicaUrl"`
	Replication string  `json:"replication"`
}

func (f *billingFleet) userToken(t *testing.T, user string) string {
	t.Helper()
	tok, code := islectl(t, f.env, "token", "-user", user)
	require.Zero(t, code, tok)
	return strings.TrimSpace(tok)
}

func (f *billingFleet) upload(t *testing.T, token, kind string, body []byte) objectAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/v1/objects?kind="+kind+"&name=f.png", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", raw)
	var a objectAnswer
	require.NoError(t, json.Unmarshal(raw, &a))
	return a
}

// content downloads an object's bytes through the API.
func (f *billingFleet) content(t *testing.T, token string, id uint64) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/v1/objects/%d/content", f.addr, id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	return raw
}

func (f *billingFleet) object(t *testing.T, token string, id uint64) objectAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/v1/objects/%d", f.addr, id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var a objectAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return a
}

// fileOf is the path of a file:// object URL.
func fileOf(t *testing.T, objectURL string) string {
	t.Helper()
	u, err := url.Parse(objectURL)
	require.NoError(t, err)
	require.Equal(t, "file", u.Scheme)
	return u.Path
}

// Uploads and a pass of identity verification, through the api, the relay
// and the worker: every object is replicated byte for byte, its row says
// where, and the material is stored. Avatars and wallpapers queued before
// the worker started are replicated avatars first.
func TestObjectsReplicatedEndToEnd(t *testing.T) {
	f := newBillingFleet(t, nil)
	e := f.env
	e["OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS"] = "100"
	relay := start(t, e, "relay")
	relay.waitFor(t, 30*time.Second, "relay started")

	ann, bob := f.userToken(t, "ann"), f.userToken(t, "bob")
	admin, code := islectl(t, e, "token", "-user", "ops", "-role", "admin")
	require.Zero(t, code, admin)
	admin = strings.TrimSpace(admin)
	var uploaded []objectAnswer
	bodies := map[uint64][]byte{}
	for i := range 6 { // wallpapers first, then avatars: priority, not order, decides
		tok, kind := ann, store.KindWallpaper
		if i >= 3 {
			tok = bob
		}
		if i >= 4 {
			kind = store.KindAvatar
		}
		body := images.SamplePNG(100_000+i, uint64(i))
		o := f.upload(t, tok, kind, body)
		require.Empty(t, o.SourceURL, "where the store keeps it is for admins")
		uploaded = append(uploaded, o)
		bodies[o.ID] = body
	}
	// The relay publishes all six before a worker consumes any.
	require.Eventually(t, func() bool { return f.depth(t, "object-replication") == 6 }, 30*time.Second, 50*time.Millisecond)

	// One channel taking one delivery at a time: the broker's order is the
	// order of replication.
	w := maps.Clone(e)
	w["WORKER_CONCURRENCY_BY_DOMAIN"], w["WORKER_PREFETCH"] = "object-replication=1", "1"
	start(t, w, "worker").waitFor(t, 30*time.Second, "worker started")
	for _, o := range uploaded {
		tok := ann
		if o.Key[len(o.Kind)+1:len(o.Kind)+4] == "bob" {
			tok = bob
		}
		var got objectAnswer
		require.Eventually(t, func() bool { got = f.object(t, tok, o.ID); return got.Replication == "done" }, 30*time.Second, 50*time.Millisecond,
			"object %d: %+v", o.ID, got)
		require.Nil(t, got.ReplicaURL, "where the store keeps it is for admins")
		require.Equal(t, bodies[o.ID], f.content(t, tok, o.ID), "the owner downloads it through the API")
		got = f.object(t, admin, o.ID)
		o.SourceURL = got.SourceURL
		require.NotNil(t, got.ReplicaURL)
		src, err := os.ReadFile(fileOf(t, o.SourceURL))
		require.NoError(t, err)
		dst, err := os.ReadFile(fileOf(t, *got.ReplicaURL))
		require.NoError(t, err)
		require.Equal(t, src, dst)
	}
	var order []store.ReplicationTask
	require.NoError(t, f.db.Order("done_at").Find(&order).Error)
	require.Len(t, order, 6)
	for i, task := range order {
		require.Equal(t, i < 2, task.Priority == store.PriorityAvatar, "replicated in order %d: task %d, priority %d", i, task.ID, task.Priority)
	}

	// Identity material, written with the pass and relayed from the outbox.
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/v1/identity/verifications/cert-77/result",
		strings.NewReader(`{"username":"ann","status":"PASSED","materialInfo":"{\"enc\":\"zz\"}"}`))
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var row store.IdentityVerification
	require.Eventually(t, func() bool {
		return f.db.Where("certify_id = ?", "cert-77").Take(&row).Error == nil && row.MaterialInfoURL != nil
	}, 30*time.Second, 50*time.Millisecond)
	material, err := os.ReadFile(fileOf(t, *row.MaterialInfoURL))
	require.NoError(t, err)
	require.Contains(t, string(material), `"certifyId":"cert-77"`)
}
