package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// A session is used up by its first accepted score: the second and third
// runs submitted on it are 409s that name the run that used it, and only
// the first is published.
func TestSessionIsUsedUpByItsFirstAcceptedScore(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	alice, _ := b.player(t, "alice")
	sess := b.session(t, alice, "2048")

	status, _, first := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-1", sess, 100, 2_000, 20))
	require.Equal(t, http.StatusAccepted, status, "%v", first)
	for i, id := range []string{"run-2", "run-3"} {
		status, _, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody(id, sess, 200+int64(i), 3_000, 30))
		require.Equal(t, http.StatusConflict, status, "%s on a used session: %v", id, out)
		require.Equal(t, "conflict", errorCode(t, out))
		require.Equal(t, "session_used", reason(t, out))
		require.Equal(t, first, out["error"].(map[string]any)["accepted"], "the run that used the session")
	}
	require.Equal(t, 1, b.scored(t), "one run published for the session")

	// The run that used it, sent again, is still the submit id's replay.
	status, _, again := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-1", sess, 100, 2_000, 20))
	require.Equal(t, http.StatusConflict, status, "%v", again)
	require.Equal(t, first, again["error"].(map[string]any)["accepted"])

	// A new session takes a new run.
	status, _, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-4", b.session(t, alice, "2048"), 300, 3_000, 30))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	require.Equal(t, 2, b.scored(t))
}

// Runs submitted at the same time on one session race for it: exactly one
// is accepted and published, the others are told the session is used.
func TestConcurrentSubmissionsOnOneSessionAcceptOne(t *testing.T) {
	t.Parallel()
	b := setup(t, options{scoreRate: 1000})
	alice, _ := b.player(t, "alice")
	sess := b.session(t, alice, "snake")

	const n = 16
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.http.URL+"/v1/games/snake/scores",
				strings.NewReader(scoreBody(fmt.Sprintf("race-%d", i), sess, int64(10*i), 2_000, 20)))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+alice)
			req.Header.Set("Content-Type", "application/json")
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusConflict: n - 1}, counts)
	require.Equal(t, 1, b.scored(t), "one message for the session")
}

// A run whose message the broker did not confirm does not use its session
// up: the client's retry with the same submit id is accepted, and only
// then is the session used.
func TestUnpublishedScoreLeavesItsSessionToTheRetry(t *testing.T) {
	t.Parallel()
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	b := setup(t, options{amqpURL: strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)})
	alice, aliceID := b.player(t, "alice")
	sess := b.session(t, alice, "tetris")

	proxy.Pause()
	status, _, out := b.do(t, http.MethodPost, "/v1/games/tetris/scores", alice, scoreBody("r1", sess, 500, 2_000, 10))
	require.Equal(t, http.StatusServiceUnavailable, status, "%v", out)
	used := b.redis.Keys().Key(keys.GameSessionUsed, "tetris", fmt.Sprint(aliceID), sess)
	n, err := b.redis.Client(keys.DBMiniGame).Exists(t.Context(), used).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the failed attempt did not use the session")
	proxy.Resume()

	require.Eventually(t, func() bool {
		status, _, _ = b.do(t, http.MethodPost, "/v1/games/tetris/scores", alice, scoreBody("r1", sess, 500, 2_000, 10))
		return status == http.StatusAccepted
	}, 10*time.Second, 200*time.Millisecond, "the retry with the same submit id is accepted")
	status, _, out = b.do(t, http.MethodPost, "/v1/games/tetris/scores", alice, scoreBody("r2", sess, 600, 2_000, 10))
	require.Equal(t, http.StatusConflict, status, "the accepted retry used the session: %v", out)
	require.Equal(t, "session_used", reason(t, out))
	require.Eventually(t, func() bool { return b.scored(t) >= 1 }, 5*time.Second, 50*time.Millisecond)
}

// Equal scores rank by who achieved them first, not by user id as text
// ("9" above "10"): on the board built from MySQL, and again after Redis
// lost it.
func TestLeaderboardRanksEqualScoresByWhoAchievedThemFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tok, _ := b.player(t, "reader")
	var ids []int64
	for i := 2; i <= 10; i++ {
		_, id := b.player(t, fmt.Sprintf("p%02d", i))
		ids = append(ids, id)
	}
	require.EqualValues(t, 10, ids[len(ids)-1], "ids 9 and 10 exist")
	// 10 first, then 9, then 3, all at 700.
	for _, r := range []struct{ user, at int64 }{{9, 2_000}, {3, 3_000}, {10, 1_000}} {
		require.NoError(t, b.db.Exec("INSERT INTO mini_game_score (user_id, game_id, score, duration_ms, moves, achieved_at, submit_id)"+
			" VALUES (?, 'snake', 700, 60000, 100, ?, ?)", r.user, 1_760_000_000_000+r.at, fmt.Sprint("tie-", r.user)).Error)
	}
	for _, wipe := range []bool{false, true} {
		if wipe {
			storetest.Wipe(t, b.redis)
		}
		status, _, out := b.do(t, http.MethodGet, "/v1/games/snake/leaderboard", tok, "")
		require.Equal(t, http.StatusOK, status, "%v", out)
		var order []string
		for _, e := range out["entries"].([]any) {
			order = append(order, e.(map[string]any)["username"].(string))
		}
		require.Equal(t, []string{"p10", "p09", "p03"}, order, "wiped first: %v", wipe)
	}
}
