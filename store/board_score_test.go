package store_test

import (
	"math/bits"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// tick is how finely game.BoardScore reads the clock for a score: 1 ms below
// 4,096 points, 2^(bits−12) ms above.
func tick(score int64) int64 {
	return 1 << max(0, bits.Len64(uint64(score))-12)
}

// The leaderboard holds each run's BoardScore exactly, through
// score_sync.lua (as a consumer's upsert and a rebuild write it), and its
// order is MySQL's: scores beyond a double's 53 bits included (rows no run
// of a game can make, written before the consumer refused them).
func TestBoardHoldsExactBoardScoresOfMySQLsRows(t *testing.T) {
	t.Parallel()
	s, db, r := newScores(t)
	ctx := t.Context()
	at := time.Now().UnixMilli()
	rows := []struct {
		user, score, at int64
	}{
		{1, 1<<53 - 1, at}, {2, 1<<53 - 1, at + 1}, {3, 1<<53 - 2, at - 10_000}, {4, 6_012_671_500, at},
		{5, 6_012_671_500, at - 1 - tick(6_012_671_500)}, {6, 1234, at + 1}, {7, 1234, at}, {8, 0, at},
	}
	for _, row := range rows {
		require.NoError(t, db.Exec("INSERT INTO mini_game_score (user_id, game_id, score, achieved_at, submit_id) VALUES (?, 'tetris', ?, ?, ?)",
			row.user, row.score, row.at, strconv.FormatInt(row.user, 10)).Error)
	}
	top, rebuilt, err := s.Leaderboard(ctx, "tetris", 10)
	require.NoError(t, err)
	require.True(t, rebuilt)
	var order []int64
	for _, e := range top {
		order = append(order, e.UserID)
	}
	// 1 and 2 tie on the board (no bits left for the time): the read puts
	// them in MySQL's order.
	require.Equal(t, []int64{1, 2, 3, 5, 4, 7, 6, 8}, order)
	c, k := r.Client(keys.DBMiniGame), r.Keys()
	for _, row := range rows {
		z, err := c.ZScore(ctx, k.Key(keys.Leaderboard, "tetris"), strconv.FormatInt(row.user, 10)).Result()
		require.NoError(t, err)
		require.Equal(t, game.BoardScore(row.score, row.at), z, "user %d", row.user)
	}
	storetest.Wipe(t, r)
	again, _, err := s.Leaderboard(ctx, "tetris", 10)
	require.NoError(t, err)
	require.Equal(t, top, again)
}
