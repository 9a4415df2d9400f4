package e2e_test

import (
	"bytes"
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// islectl demo, run against an api, a worker and a relay that trust test
// gateway keys, drives every domain and ends with its summary: orders
// paid, objects replicated, a leaderboard, mails written; within 90 s.
func TestDemoRunsAgainstAFleet(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	keys := payKeys(t, e)
	api := start(t, e, "api")
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(api.waitFor(t, 30*time.Second, "api started"))[1]
	start(t, e, "relay").waitFor(t, 30*time.Second, "relay started")
	start(t, e, "worker").waitFor(t, 30*time.Second, "worker started")

	ctl := maps.Clone(e)
	ctl["API_ADDR"] = addr // the demo finds the API as pay simulate does
	mailDir := e.mailDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "islectl"), "demo", "-duration", "10s", "-users", "3",
		"-paykeys", keys, "-mail-dir", mailDir, "-mailpit", "http://127.0.0.1:1") // no Mailpit: the mails are files
	cmd.Env = ctl.list()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	took := time.Since(began)
	summary := stdout.String()
	t.Logf("islectl demo took %s:\n%s", took.Round(time.Second), summary)
	require.Less(t, took, 90*time.Second)
	require.Contains(t, stderr.String(), "traffic  [", "the progress line")

	// "n of m ...": n > 0 and all of them.
	all := func(pattern string) int {
		t.Helper()
		m := regexp.MustCompile(`(\d+) of (\d+) ` + pattern).FindStringSubmatch(summary)
		require.NotNil(t, m, "%q in the summary", pattern)
		require.Equal(t, m[2], m[1], "%q: all of them", m[0])
		n, _ := strconv.Atoi(m[1])
		require.Positive(t, n, m[0])
		return n
	}
	all("orders PAID")
	all("replicated")
	all("charges in agent_ledger")
	all("player bests in mini_game_score")
	all("passes with their material stored")
	all("counted in agent_usage_event")
	// Part of the usage went as batches: every batch taken, every item
	// charged or answered as the replay of a charge sent alone before.
	m := regexp.MustCompile(`(?m)^agent usage batches +(\d+) +(\d+) +0 +0 +0 +(\d+) items: (\d+) charged, (\d+) charges sent alone .* (\d+) refused$`).FindStringSubmatch(summary)
	require.NotNil(t, m, "the batches' row")
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	require.Positive(t, n[1], "batches sent")
	require.Equal(t, n[1], n[2], "batches accepted")
	require.Positive(t, n[4], "items charged")
	require.Equal(t, n[3], n[4]+n[5], "every item charged or a replay")
	require.Zero(t, n[6], "items refused")
	require.Regexp(t, `\(`+m[4]+` of the charges sent in batches\)`, summary)
	require.Regexp(t, `(?m)^mails: [1-9]\d* of \d+ expected .* as \.eml files in `+regexp.QuoteMeta(mailDir), summary)
	require.Regexp(t, `(?m)^leaderboard 2048, top 5 .*\n  1  demo-0[1-3]  \d+`, summary)
	require.Regexp(t, `(?m)^email codes +3 +3 +0 `, summary, "3 codes asked and accepted")
	require.Contains(t, summary, "queues: all empty")
	require.NotContains(t, summary, "NOT everything took effect")
	require.NotContains(t, summary, "off by", "every balance is its ledger")
}
