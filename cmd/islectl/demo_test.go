package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eisland/isle/game"
	"github.com/stretchr/testify/require"
)

// Every run the demo submits passes the API's plausibility check for its
// game, whatever the session's age (game.Session.CheckRun).
func TestDemoRunsArePlausible(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, id := range demoGames {
		for i := range 2000 {
			played := time.Duration(i%1000) * time.Millisecond
			score, durationMs, moves := demoRun(id, played)
			sess := game.Session{GameID: id, StartedAt: now.Add(-played)}
			require.NoError(t, sess.CheckRun(score, durationMs, moves, now), "%s: %d points, %d ms, %d moves", id, score, durationMs, moves)
			require.Positive(t, score)
		}
	}
}

// The plan keeps within the API's limits: 3 avatars an hour per client
// IP, 5 wallpapers an hour per user, 10 scores a minute per user and game,
// -codes codes; every step is due within the duration.
func TestDemoPlanKeepsWithinTheLimits(t *testing.T) {
	t.Parallel()
	for _, dur := range []time.Duration{5 * time.Second, 10 * time.Second, 40 * time.Second, 10 * time.Minute} {
		d := &demo{flags: demoFlags{duration: dur, users: 7, codes: 3}, keys: &payKeys{}}
		for i := range 7 {
			d.users = append(d.users, demoUser{Name: fmt.Sprintf("demo-%02d", i+1)})
		}
		steps := d.plan()
		require.NotEmpty(t, steps)
		for i, s := range steps {
			require.Less(t, s.at, dur+2*time.Second, "step %d", i)
			if i > 0 {
				require.GreaterOrEqual(t, s.at, steps[i-1].at, "in time order")
			}
		}
		rounds := perDuration(dur, 10*time.Second, 1, 5)
		require.LessOrEqual(t, float64(rounds)/max(dur.Minutes(), 1), 10.0, "scores a minute per user and game")
		batches := perDuration(dur, demoBatchEvery, 1, 12)
		require.Len(t, steps, 7*perDuration(dur, 2*time.Second, 2, 30)+batches+3+2*7+7+3+7+3*7*rounds+3, "%s", dur)
	}
}

// Each item of a batch counts as a single charge would: charged (in the
// charges the ledger must have, and in the usage events), a replay, or
// refused with its status and code; an answer without one result an item
// counts nothing.
func TestDemoCountsEachItemOfABatch(t *testing.T) {
	t.Parallel()
	d := &demo{}
	items := []map[string]any{
		usageBody("demo-r-demo-01-b00-0", "demo-01"), usageBody("demo-r-demo-02-b00-0", "demo-02"),
		usageBody("demo-r-demo-01-007", "demo-01"), usageBody("demo-r-demo-02-b00-1", "demo-02"),
	}
	d.countBatch(items, apiAnswer{Status: http.StatusOK, Body: []byte(`{"results":[
		{"status":200,"charge":{"deductedFen":"0.30000000","replayed":false}},
		{"status":402,"error":{"code":"payment_required","message":"the agent balance is zero"}},
		{"status":200,"charge":{"deductedFen":"0.30000000","replayed":true}},
		{"status":200,"charge":{"deductedFen":"0.12000000","replayed":false}}]}`)})
	require.Equal(t, batchTally{Items: 4, Charged: 2, Replays: 1, Refused: map[string]int{"402 payment_required": 1}}, d.batches)
	require.Equal(t, 1, d.batches.refused())
	require.Equal(t, 2, d.charges)
	require.Equal(t, []string{"demo-01:demo-r-demo-01-b00-0", "demo-02:demo-r-demo-02-b00-1"}, d.usageIDs)

	d.countBatch(items, apiAnswer{Status: http.StatusOK, Body: []byte(`{"results":[]}`)})
	require.Equal(t, 1, d.batches.Unread)
	require.Equal(t, 4, d.batches.Items)
}

func TestSpreadIsEvenAndBounded(t *testing.T) {
	t.Parallel()
	require.Equal(t, []time.Duration{time.Second, 5 * time.Second, 9 * time.Second}, spread(3, 10*time.Second, 0.1, 0.9))
	require.Equal(t, []time.Duration{time.Second}, spread(1, 10*time.Second, 0.1, 0.9))
	require.Empty(t, spread(0, 10*time.Second, 0.1, 0.9))
	require.Equal(t, 2, perDuration(time.Second, 2*time.Second, 2, 30))
	require.Equal(t, 30, perDuration(time.Hour, 2*time.Second, 2, 30))
}

func TestDemoPNGIsAPNGOfTheSize(t *testing.T) {
	t.Parallel()
	raw, err := demoPNG(320, 180, 3)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, 320, img.Bounds().Dx())
	require.Equal(t, 180, img.Bounds().Dy())
}

// The run's mails are found by their idempotency keys: receipts by order
// number, codes by address and time, in the directory and in Mailpit.
func TestDemoCountsItsMails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	eml := func(name, to string, at time.Time) {
		path := filepath.Join(dir, name+".eml")
		require.NoError(t, os.WriteFile(path, []byte("To: <"+to+">\r\nSubject: x\r\n\r\nbody\r\n"), 0o600))
		require.NoError(t, os.Chtimes(path, at, at))
	}
	began := time.Now()
	eml("code-aaaa", "demo-01@example.com", began.Add(time.Second))
	eml("code-bbbb", "demo-01@example.com", began.Add(-time.Hour)) // an earlier run's
	eml("code-cccc", "alice@example.com", began.Add(time.Second))  // someone else's
	eml("receipt-NO1", "demo-02@example.com", began.Add(time.Second))
	eml("receipt-NO9", "demo-02@example.com", began.Add(time.Second)) // not this run's order

	mailpit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
		case "/api/v1/messages":
			fmt.Fprintf(w, `{"total":3,"messages":[
				{"MessageID":"code-dddd@isle.local","To":[{"Name":"","Address":"DEMO-02@example.com"}],"Created":%q},
				{"MessageID":"receipt-NO2@isle.local","To":[{"Address":"demo-01@example.com"}],"Created":%q},
				{"MessageID":"other@isle.local","To":[{"Address":"demo-01@example.com"}],"Created":%q}]}`,
				began.Add(time.Second).Format(time.RFC3339Nano), began.Format(time.RFC3339Nano), began.Format(time.RFC3339Nano))
		default:
			http.NotFound(w, r)
		}
	}))
	defer mailpit.Close()

	d := &demo{began: began, flags: demoFlags{mailDir: dir, mailpit: mailpit.URL},
		users: []demoUser{{Name: "demo-01", Email: "demo-01@example.com"}, {Name: "demo-02", Email: "demo-02@example.com"}}}
	m := d.countMails(context.Background(), []string{"NO1", "NO2"})
	require.Equal(t, mailCount{Codes: 2, Receipts: 2, InMailpit: 2, Mailpit: mailpit.URL, Dir: dir}, m)

	d.flags.mailpit = "http://127.0.0.1:1"
	m = d.countMails(context.Background(), []string{"NO1", "NO2"})
	require.Equal(t, mailCount{Codes: 1, Receipts: 1, Dir: dir}, m)
}

// Without a fleet the demo fails at once and says how to start one.
func TestDemoWithoutAFleetSaysHowToStartIt(t *testing.T) {
	t.Parallel()
	var out, progress bytes.Buffer
	lookup := func(string) (string, bool) { return "", false }
	err := run(context.Background(), []string{"demo", "-api", "http://127.0.0.1:1"}, lookup, &out, &progress)
	require.ErrorContains(t, err, "no Isle API answers at http://127.0.0.1:1")
	require.ErrorContains(t, err, "start the fleet with scripts/up")

	err = run(context.Background(), []string{"demo", "-users", "0"}, lookup, &out, &progress)
	require.ErrorIs(t, err, errUsage)
}
