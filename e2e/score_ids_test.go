package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Two users send runs with one submit id through the real api and worker:
// both are accepted and both kept, each user's best. The same user's id
// again is refused, and nothing more is applied.
func TestOneSubmitIDOfTwoUsersKeepsBothRuns(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, map[string]string{"ann": "0", "ben": "0"})
	start(t, f.env, "worker").waitFor(t, 30*time.Second, "worker started")

	call := func(user, path, body string) (int, map[string]any) {
		t.Helper()
		tok, code := islectl(t, f.env, "token", "-user", user, "-role", "user")
		require.Zero(t, code, tok)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+f.addr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	submit := func(user string, score int) (int, map[string]any) {
		t.Helper()
		status, sess := call(user, "/v1/games/snake/sessions", "")
		require.Equal(t, http.StatusCreated, status, "%v", sess)
		return call(user, "/v1/games/snake/scores", fmt.Sprintf(`{"submitId":"shared-1","sessionId":%q,"score":%d,"durationMs":1000,"moves":10}`,
			sess["sessionId"], score))
	}

	for user, score := range map[string]int{"ben": 30, "ann": 50} {
		status, out := submit(user, score)
		require.Equal(t, http.StatusAccepted, status, "%s: %v", user, out)
	}
	scores := store.NewScores(f.db, f.rdb)
	ids := map[string]int64{}
	for _, user := range []string{"ann", "ben"} {
		acc, err := store.NewAccounts(f.db).Get(t.Context(), user)
		require.NoError(t, err)
		ids[user] = int64(acc.ID)
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if _, err := scores.Best(t.Context(), "snake", id); err != nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "both runs applied")
	for user, want := range map[string]int64{"ann": 50, "ben": 30} {
		row, err := scores.Best(t.Context(), "snake", ids[user])
		require.NoError(t, err)
		require.Equal(t, want, row.Score, user)
		require.Equal(t, "shared-1", row.SubmitID)
	}

	status, out := submit("ann", 60)
	require.Equal(t, http.StatusConflict, status, "ann's id again: %v", out)
	require.Zero(t, f.depth(t, topology.DomainMiniGameScore))
	row, err := scores.Best(t.Context(), "snake", ids["ann"])
	require.NoError(t, err)
	require.EqualValues(t, 50, row.Score)
}
