// Package browsertest drives a headless chromium (Debian's) for the
// browser tests and saves their screenshots: in the test's artifact
// directory (go test -artifacts) and, when EnvScreenshots names one, there
// too (how the pictures in doc/img are made).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// EnvScreenshots names a directory the browser tests also save their
// screenshots to: ISLE_SCREENSHOTS=$PWD/doc/img makes the README's.
const EnvScreenshots = "ISLE_SCREENSHOTS"

// step bounds each step of a test.
const step = 30 * time.Second

// Browser is a headless chromium driven by chromedp.
type Browser struct {
	t   *testing.T
	ctx context.Context
	dir string
}

// New starts chromium for t, for at most whole; the test is skipped when
// chromium is not installed (scripts/test installs Debian's as root).
func New(t *testing.T, whole time.Duration) *Browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/test installs Debian's as root): ", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root, where chromium's sandbox refuses to start
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := context.WithTimeout(context.Background(), whole)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	require.NoError(t, chromedp.Do(ctx), "start chromium") // on ctx itself: a step's timeout must not close the browser
	return &Browser{t: t, ctx: ctx, dir: os.Getenv(EnvScreenshots)}
}

// Do runs the step what, bounded by 30 seconds.
func (b *Browser) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...), what)
}

// Text reads the visible text of the element sel selects.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	s, err := b.TryText(sel)
	require.NoError(b.t, err, sel)
	return s
}

// TryText is Text, with its error, waiting at most 5 seconds.
func (b *Browser) TryText(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
}

// Screenshot saves the whole page as the PNG name.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err, name)
	require.NoError(b.t, os.WriteFile(filepath.Join(b.t.ArtifactDir(), name), png, 0o644))
	if b.dir != "" {
		require.NoError(b.t, os.WriteFile(filepath.Join(b.dir, name), png, 0o644))
	}
}
