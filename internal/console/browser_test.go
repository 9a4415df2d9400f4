package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/eisland/isle/internal/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// EnvScreenshots names a directory the browser test also saves its
// screenshots to: ISLE_SCREENSHOTS=$PWD/doc/img makes the README's.
const EnvScreenshots = "ISLE_SCREENSHOTS"

// browserStep bounds each step of the browser test; browserRun the whole.
const (
	browserStep = 30 * time.Second
	browserRun  = 4 * time.Minute
)

// The console in a real browser (Debian's chromium, headless), served by the
// API under /admin/ on a seeded fleet: log in with an admin token, open
// each page, replay a dead deduction from its page and see the worker's
// consumer apply it, look up a user with pending deductions, and run a job.
// Each page's screenshot is saved (ISLE_SCREENSHOTS, and the test's
// artifact directory: go test -artifacts).
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/test installs Debian's as root): ", err)
	}
	f := newFleet(t)
	b := newBrowser(t, chromium)
	base := f.api.URL + "/admin"

	// Without a token the console answers the login form; an admin's token
	// opens it.
	b.do("login", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("textarea[name=token]")),
		chromedp.SendKeys(css("textarea[name=token]"), f.adminJWT), chromedp.Click(css("#login")), chromedp.WaitVisible(css("#queues")))
	require.Equal(t, "operator root", strings.TrimSpace(b.text("header .who")))

	// The overview, once the broker has counted the email queue's 40
	// messages and the sparklines have a few samples.
	email, _ := f.tp.Domain(topology.DomainEmail)
	row := `tr[data-queue="` + email.Queue + `"] td.depth`
	var seen string
	require.Eventually(t, func() bool {
		b.do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#queues")))
		seen, _ = b.tryText(`tr[data-queue="` + email.Queue + `"]`)
		n, _ := b.tryText(row)
		return strings.TrimSpace(n) == "40"
	}, 40*time.Second, time.Second, "the overview shows the email queue's depth")
	t.Logf("email queue row: %q", seen)
	time.Sleep(4 * time.Second) // a few more samples for the sparklines
	b.do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#queues")))
	require.Contains(t, b.text("#health"), "MySQL")
	b.screenshot("console-overview.png")

	// Dead messages: the list, and one whole with its two deaths.
	b.do("dead", chromedp.Navigate(base+"/dead"), chromedp.WaitVisible(css("#dead")))
	list := b.text("#dead")
	require.Contains(t, list, f.deadRef)
	require.Contains(t, list, f.deadEmail)
	b.screenshot("console-dead.png")
	b.do("dead message", chromedp.Navigate(base+"/dead/"+f.deadEmail), chromedp.WaitVisible(css("#history")))
	require.Equal(t, 2, strings.Count(b.text("#history"), "email/"), "both deaths of the message")
	b.screenshot("console-dead-message.png")

	// Replay the dead deduction from its page; the billing consumer applies
	// it: the money page shows its ledger row, and it is no longer pending.
	b.do("replay", chromedp.Navigate(base+"/dead/"+f.deadRef), chromedp.WaitVisible(css("#replay")), chromedp.Click(css("#replay")),
		chromedp.WaitVisible(css("#result")))
	require.Contains(t, b.text("#result"), "1 selected: 0 not replayed")
	b.screenshot("console-replayed.png")
	b.do("money", chromedp.Navigate(base+"/money"), chromedp.WaitVisible(css("input[name=user]")),
		chromedp.SendKeys(css("input[name=user]"), "erin"), chromedp.Submit(css("input[name=user]")), chromedp.WaitVisible(css("#balances")))
	var ledger string
	require.Eventually(t, func() bool {
		b.do("money", chromedp.Navigate(base+"/money?user=erin"), chromedp.WaitVisible(css("#ledger")))
		ledger = b.text("#ledger")
		return strings.Contains(ledger, "req-erin-2")
	}, 20*time.Second, 250*time.Millisecond, "the replayed deduction reaches the ledger")
	require.Contains(t, ledger, store.LedgerDeduct)
	pending := b.text("#pending")
	require.NotContains(t, pending, "req-erin-2", "applied, so no longer pending")
	require.Contains(t, pending, "req-erin-1", "the other deductions still pending")
	require.Contains(t, pending, "req-erin-3")
	require.Equal(t, "0.00000000", strings.TrimSpace(b.text("#drift")))
	b.screenshot("console-money.png")

	// Run balance-sync now; the jobs page shows the run and who made it.
	b.do("run job", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(css("#run-balance-sync")), chromedp.Click(css("#run-balance-sync")),
		chromedp.WaitVisible(css("#result")))
	require.Contains(t, b.text("#result"), "balance-sync ran in")
	b.do("jobs", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(css("#job-balance-sync")))
	require.Contains(t, b.text("#job-balance-sync"), "console (root)")
	b.screenshot("console-jobs.png")
	runs, err := reconcile.NewRuns(f.db).Last(context.Background(), 5, "balance-sync")
	require.NoError(t, err)
	require.Equal(t, "console (root)", runs["balance-sync"][0].StartedBy)
	require.Equal(t, reconcile.OutcomeOK, runs["balance-sync"][0].Outcome)
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// browser is a headless chromium driven by chromedp.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // where screenshots go besides the artifact directory
}

func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root, where chromium's sandbox refuses to start
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	whole, cancel := context.WithTimeout(context.Background(), browserRun)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(whole, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	require.NoError(t, chromedp.Do(ctx), "start chromium") // on ctx itself: a step's timeout must not close the browser
	return &browser{t: t, ctx: ctx, dir: os.Getenv(EnvScreenshots)}
}

// do runs one step, bounded by browserStep.
func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...), step)
}

// text reads the visible text of the element sel selects.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := b.tryText(sel)
	require.NoError(b.t, err, sel)
	return s
}

func (b *browser) tryText(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Text(css(sel)))
}

// screenshot saves the whole page as a PNG.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err, name)
	require.NoError(b.t, os.WriteFile(filepath.Join(b.t.ArtifactDir(), name), png, 0o644))
	if b.dir != "" {
		require.NoError(b.t, os.WriteFile(filepath.Join(b.dir, name), png, 0o644))
	}
}
