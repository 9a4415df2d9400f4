package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// heldStore is a source store whose Put of an object named held.png
// says so on entered, then waits for release and fails: an upload that
// was counted and fails later, when the test says.
type heldStore struct {
	objstore.Store
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (objstore.Info, error) {
	if !strings.HasSuffix(key, "/held.png") {
		return s.Store.Put(ctx, key, r, size, contentType)
	}
	close(s.entered)
	<-s.release
	return objstore.Info{}, errors.New("the store went away")
}

// testClock is the server's clock, moved by the test.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// An upload counted in one window of the wallpaper limit and failed after
// the window ended gives its count back to no window: not to the next
// one, where it would let one more upload through than the limit.
func TestUploadFailedAfterItsWindowEndedGivesNothingBack(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	dir, err := objstore.Open("file://"+t.TempDir(), objstore.Options{})
	require.NoError(t, err)
	objects := &heldStore{Store: dir, entered: make(chan struct{}), release: make(chan struct{})}
	clock := &testClock{now: time.Now()}
	srv, err := httpapi.New(httpapi.Config{JWTSecret: secret}, httpapi.Backends{DB: db, Redis: r, Billing: billing.New(db, r),
		Log: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(), Objects: objects, Now: clock.Now})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	b := &testBundle{http: ts}
	tok, err := httpapi.MintToken(secret, "ann", httpapi.RoleUser, 48*time.Hour, time.Now()) // outlives the clock's moves
	require.NoError(t, err)
	upload := func(name string, seed uint64) (int, map[string]any) {
		return b.uploadWith(t, tok, "kind=wallpaper&name="+name, images.SamplePNG(100, seed))
	}

	// Window W: an upload is counted, and its store is slow.
	held := make(chan int, 1)
	release := sync.OnceFunc(func() { close(objects.release) })
	t.Cleanup(release) // before the server closes, should the test stop early
	go func() {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL+"/v1/objects?kind=wallpaper&name=held.png",
			bytes.NewReader(images.SamplePNG(100, 1)))
		if err != nil {
			held <- 0
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	select {
	case <-objects.entered:
	case status := <-held:
		t.Fatalf("the held upload was answered %d before it reached its store", status)
	}

	// W ends: the clock passes its end, and Redis drops its counter as the
	// counter's TTL runs out. The next upload opens window W+1.
	clock.Add(keys.WallpaperUpload.TTL + time.Second)
	counter := r.Keys().Key(keys.WallpaperUpload, "ann")
	require.NoError(t, r.Client(keys.WallpaperUpload.DB).Del(t.Context(), counter).Err())
	status, body := upload("w1.png", 2)
	require.Equal(t, http.StatusCreated, status, "%v", body)

	// The held upload fails now, in W+1.
	release()
	require.Equal(t, http.StatusServiceUnavailable, <-held)

	// W+1 takes 5 wallpapers: w1 and 4 more, not 5 more.
	for i := range 4 {
		status, body := upload("w.png", uint64(10+i))
		require.Equal(t, http.StatusCreated, status, "upload %d of W+1: %v", i+2, body)
	}
	status, body = upload("w.png", 20)
	require.Equal(t, http.StatusTooManyRequests, status, "the 6th upload of W+1: %v", body)
}
