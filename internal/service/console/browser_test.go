package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/eisland/isle/internal/kit/browsertest"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// browserRun bounds the whole browser test.
const browserRun = 4 * time.Minute

// The console in a real browser (Debian's chromium, headless), served by the
// API under /admin/ on a seeded fleet: log in with an admin token, open
// each page, replay a dead deduction from its page and see the worker's
// consumer apply it, look up a user with pending deductions, and run a job.
// Each page's screenshot is saved (ISLE_SCREENSHOTS, and the test's
// artifact directory: go test -artifacts).
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t, browserRun)
	f := newFleet(t)
	base := f.api.URL + "/admin"

	// Without a token the console answers the login form; an admin's token
	// opens it.
	b.Do("login", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("textarea[name=token]")),
		chromedp.SendKeys(chromedp.CSS("textarea[name=token]"), f.adminJWT), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#queues")))
	require.Equal(t, "operator root", strings.TrimSpace(b.Text("header .who")))

	// The overview, once the broker has counted the email queue's 40
	// messages and the sparklines have a few samples.
	email, _ := f.tp.Domain(topology.DomainEmail)
	row := `tr[data-queue="` + email.Queue + `"] td.depth`
	var seen string
	require.Eventually(t, func() bool {
		b.Do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#queues")))
		seen, _ = b.TryText(`tr[data-queue="` + email.Queue + `"]`)
		n, _ := b.TryText(row)
		return strings.TrimSpace(n) == "40"
	}, 40*time.Second, time.Second, "the overview shows the email queue's depth")
	t.Logf("email queue row: %q", seen)
	time.Sleep(4 * time.Second) // a few more samples for the sparklines
	b.Do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#queues")))
	require.Contains(t, b.Text("#health"), "MySQL")
	b.Screenshot("console-overview.png")

	// Dead messages: the list, and one whole with its two deaths.
	b.Do("dead", chromedp.Navigate(base+"/dead"), chromedp.WaitVisible(chromedp.CSS("#dead")))
	list := b.Text("#dead")
	require.Contains(t, list, f.deadRef)
	require.Contains(t, list, f.deadEmail)
	b.Screenshot("console-dead.png")
	b.Do("dead message", chromedp.Navigate(base+"/dead/"+f.deadEmail), chromedp.WaitVisible(chromedp.CSS("#history")))
	require.Equal(t, 2, strings.Count(b.Text("#history"), "email/"), "both deaths of the message")
	b.Screenshot("console-dead-message.png")

	// Replay the dead deduction from its page; the billing consumer applies
	// it: the money page shows its ledger row, and it is no longer pending.
	b.Do("replay", chromedp.Navigate(base+"/dead/"+f.deadRef), chromedp.WaitVisible(chromedp.CSS("#replay")), chromedp.Click(chromedp.CSS("#replay")),
		chromedp.WaitVisible(chromedp.CSS("#result")))
	require.Contains(t, b.Text("#result"), "1 selected: 0 not replayed")
	b.Screenshot("console-replayed.png")
	b.Do("money", chromedp.Navigate(base+"/money"), chromedp.WaitVisible(chromedp.CSS("input[name=user]")),
		chromedp.SendKeys(chromedp.CSS("input[name=user]"), "erin"), chromedp.Submit(chromedp.CSS("input[name=user]")), chromedp.WaitVisible(chromedp.CSS("#balances")))
	var ledger string
	require.Eventually(t, func() bool {
		b.Do("money", chromedp.Navigate(base+"/money?user=erin"), chromedp.WaitVisible(chromedp.CSS("#ledger")))
		ledger = b.Text("#ledger")
		return strings.Contains(ledger, "req-erin-2")
	}, 20*time.Second, 250*time.Millisecond, "the replayed deduction reaches the ledger")
	require.Contains(t, ledger, store.LedgerDeduct)
	pending := b.Text("#pending")
	require.NotContains(t, pending, "req-erin-2", "applied, so no longer pending")
	require.Contains(t, pending, "req-erin-1", "the other deductions still pending")
	require.Contains(t, pending, "req-erin-3")
	require.Equal(t, "0.00000000", strings.TrimSpace(b.Text("#drift")))
	b.Screenshot("console-money.png")

	// Run balance-sync now; the jobs page shows the run and who made it.
	b.Do("run job", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("#run-balance-sync")), chromedp.Click(chromedp.CSS("#run-balance-sync")),
		chromedp.WaitVisible(chromedp.CSS("#result")))
	require.Contains(t, b.Text("#result"), "balance-sync ran in")
	b.Do("jobs", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("#job-balance-sync")))
	require.Contains(t, b.Text("#job-balance-sync"), "console (root)")
	b.Screenshot("console-jobs.png")
	runs, err := store.NewJobRuns(f.db).Last(context.Background(), 5, "balance-sync")
	require.NoError(t, err)
	require.Equal(t, "console (root)", runs["balance-sync"][0].StartedBy)
	require.Equal(t, store.JobOK, runs["balance-sync"][0].Outcome)
}
