package objstore_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/objstore"
)

// fakeS3Env makes the test binary serve a fake S3 instead of running tests
// (see fakeS3Process).
const fakeS3Env = "OBJSTORE_TEST_FAKE_S3_SERVER"

const testBucket = "isle-test"

func TestMain(m *testing.M) {
	if os.Getenv(fakeS3Env) == "1" {
		serveFakeS3()
		return
	}
	os.Exit(m.Run())
}

func newFakeS3() (http.Handler, error) {
	backend := s3mem.New()
	if err := backend.CreateBucket(testBucket); err != nil {
		return nil, err
	}
	return gofakes3.New(backend).Server(), nil
}

// serveFakeS3 runs in the child process: it prints the server's URL and
// serves until its stdin closes, which the parent's end does.
func serveFakeS3() {
	h, err := newFakeS3()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake s3:", err)
		os.Exit(1)
	}
	srv := httptest.NewTLSServer(h)
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// s3Fixture is a store on a fake S3 and a raw client to look behind it.
type s3Fixture struct {
	store objstore.Store
	raw   *minio.Client
	url   string
}

// The fake is served over TLS: gofakes3 stores minio-go's aws-chunked
// framing as the object's bytes for multipart or unknown-size uploads over
// plain HTTP (libraries.md), and would let a corrupting store pass.
func newS3(t *testing.T, opts objstore.Options) s3Fixture {
	t.Helper()
	h, err := newFakeS3()
	require.NoError(t, err)
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return openS3(t, strings.TrimPrefix(srv.URL, "https://"), srv.Client().Transport, opts)
}

// fakeS3Process serves the fake S3 from a child process, so that the
// objects it holds are not in this process's heap (the memory tests).
func fakeS3Process(t *testing.T, opts objstore.Options) s3Fixture {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeS3Env+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	endpoint := strings.TrimPrefix(strings.TrimSpace(line), "https://")
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the child's own test certificate
	return openS3(t, endpoint, tr, opts)
}

func openS3(t *testing.T, endpoint string, tr http.RoundTripper, opts objstore.Options) s3Fixture {
	t.Helper()
	opts.AccessKey, opts.SecretKey, opts.Transport = "test-access", "test-secret", tr
	u := "s3://" + testBucket + "?endpoint=" + endpoint + "&region=us-east-1&secure=true"
	s, err := objstore.Open(u, opts)
	require.NoError(t, err)
	raw, err := minio.New(endpoint, &minio.Options{
		Creds: credentials.NewStaticV4("test-access", "test-secret", ""), Secure: true, Region: "us-east-1", Transport: tr,
	})
	require.NoError(t, err)
	return s3Fixture{store: s, raw: raw, url: u}
}

// contents lists what the bucket holds: objects, and multipart uploads
// begun and not finished.
func (f s3Fixture) contents(t *testing.T) []string {
	t.Helper()
	var got []string
	for o := range f.raw.ListObjects(context.Background(), testBucket, minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, o.Err)
		got = append(got, o.Key)
	}
	for u := range f.raw.ListIncompleteUploads(context.Background(), testBucket, "", true) {
		if minio.ToErrorResponse(u.Err).Code == "NoSuchUpload" {
			break // gofakes3: the bucket never had a multipart upload
		}
		require.NoError(t, u.Err)
		got = append(got, "upload:"+u.Key)
	}
	return got
}

// dirFixture is a directory store on a fresh directory.
type dirFixture struct {
	store objstore.Store
	root  string
}

func newDir(t *testing.T, opts objstore.Options) dirFixture {
	t.Helper()
	root := t.TempDir()
	s, err := objstore.Open("file://"+root, opts)
	require.NoError(t, err)
	return dirFixture{store: s, root: root}
}

// contents lists every file under the root, temporary ones included.
func (f dirFixture) contents(t *testing.T) []string {
	t.Helper()
	var got []string
	err := filepath.WalkDir(f.root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(f.root, path)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	require.NoError(t, err)
	return got
}

// backend is one store under test with a way to see all it holds.
type backend struct {
	name     string
	open     func(t *testing.T, opts objstore.Options) (objstore.Store, func(t *testing.T) []string)
	keepsCT  bool // keeps the content type
	partSize int64
}

var backends = []backend{
	{name: "dir", open: func(t *testing.T, opts objstore.Options) (objstore.Store, func(*testing.T) []string) {
		t.Helper()

		f := newDir(t, opts)
		return f.store, f.contents
	}},
	{name: "s3", keepsCT: true, partSize: objstore.PartSizeDefault, open: func(t *testing.T, opts objstore.Options) (objstore.Store, func(*testing.T) []string) {
		t.Helper()

		f := newS3(t, opts)
		return f.store, f.contents
	}},
}

// randomBytes returns n bytes that differ between seeds.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7})
	_, _ = r.Read(b)
	return b
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// onlyReader hides every method but Read, as a request body does.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// readAll gets key and returns its bytes and Info.
func readAll(t *testing.T, s objstore.Store, key string) ([]byte, objstore.Info) {
	t.Helper()
	rc, info, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b, info
}

// pattern is n deterministic bytes, made as they are read: a large object
// that no one holds in memory.
type pattern struct {
	seed   uint64
	off, n int64
}

func newPattern(seed uint64, n int64) *pattern { return &pattern{seed: seed, n: n} }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	if rest := p.n - p.off; int64(len(b)) > rest {
		b = b[:rest]
	}
	i := 0
	for i < len(b) {
		// one mixed word per 8 bytes of offset (splitmix64 finalizer)
		w := uint64((p.off+int64(i))>>3)*0x9e3779b97f4a7c15 ^ p.seed
		w ^= w >> 31
		w *= 0xbf58476d1ce4e5b9
		w ^= w >> 29
		for k := (p.off + int64(i)) & 7; k < 8 && i < len(b); k++ {
			b[i] = byte(w >> (8 * k))
			i++
		}
	}
	p.off += int64(len(b))
	return len(b), nil
}

// sameStream compares two readers chunk by chunk, holding neither whole.
func sameStream(t *testing.T, want, got io.Reader) {
	t.Helper()
	wb, gb := make([]byte, 64<<10), make([]byte, 64<<10)
	var off int64
	for {
		wn, werr := io.ReadFull(want, wb)
		gn, gerr := io.ReadFull(got, gb)
		if !bytes.Equal(wb[:wn], gb[:gn]) {
			for i := 0; i < min(wn, gn); i++ {
				if wb[i] != gb[i] {
					require.Failf(t, "streams differ", "at byte %d", off+int64(i))
				}
			}
			require.Failf(t, "streams differ", "lengths: want %d, got %d bytes at %d", wn, gn, off)
		}
		off += int64(wn)
		if werr == io.EOF || werr == io.ErrUnexpectedEOF {
			require.ErrorIs(t, gerr, werr, "got goes on after %d bytes", off)
			return
		}
		require.NoError(t, werr)
		require.NoError(t, gerr)
	}
}

// peakHeapGrowth runs f and returns how far the heap grew over its level
// before f, sampled every millisecond.
func peakHeapGrowth(f func()) (peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var top atomic.Uint64
	top.Store(base)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > top.Load() {
				top.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return top.Load() - base
}
