package store_test

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// tick is how finely BoardScore reads the clock for a score: 1 ms below
// 4,096 points, 2^(bits−12) ms above.
func tick(score int64) int64 {
	return 1 << max(0, bits.Len64(uint64(score))-12)
}

// A board score is exact: its whole part is the score, a higher score
// always ranks higher (the latest run of n above the earliest of n−1), and
// of equal scores the earlier run ranks higher, strictly once they are a
// tick apart. Up to 2^53 − 1, the last whole number a double holds.
func TestBoardScoreIsExactAndRanksByScoreThenTime(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(53, 41))
	epoch := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	end := epoch + 1<<41 - 1
	scores := []int64{0, 1, 4095, 4096, 1 << 20, 64_815_000, 6_012_671_500, 1<<53 - 2, 1<<53 - 1}
	for range 2000 {
		scores = append(scores, rnd.Int64N(1<<rnd.IntN(54)))
	}
	for _, s := range scores {
		at := epoch + rnd.Int64N(end-epoch)
		z := store.BoardScore(s, at)
		require.Equal(t, float64(s), math.Floor(z), "%d: the whole part", s)
		require.Equal(t, s, int64(z), "%d: a reader that truncates", s)
		text := strconv.FormatFloat(z, 'g', -1, 64)
		back, err := strconv.ParseFloat(text, 64)
		require.NoError(t, err)
		require.Equal(t, z, back, "%d: the text ZADD gets reads back the same", s)

		if s > 0 {
			require.Greater(t, store.BoardScore(s, end), store.BoardScore(s-1, epoch), "%d: a point beats any time", s)
		}
		require.GreaterOrEqual(t, store.BoardScore(s, epoch), z, "%d: the earliest run", s)
		require.GreaterOrEqual(t, z, store.BoardScore(s, end), "%d: the latest run", s)
		if s < 1<<53-1 && at+tick(s) <= end {
			require.Greater(t, z, store.BoardScore(s, at+tick(s)), "%d: a tick later ranks lower", s)
		}
	}
	require.Equal(t, store.BoardScore(5, 0), store.BoardScore(5, epoch), "before the clock starts: its start")
	require.Equal(t, store.BoardScore(5, math.MaxInt64), store.BoardScore(5, end), "past its end: its end")
	require.Equal(t, float64(1<<53), store.BoardScore(math.MaxInt64, epoch), "past 2^53: capped")
	require.Less(t, store.BoardScore(1<<53-1, epoch), store.BoardScore(1<<53, epoch))
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
		require.Equal(t, store.BoardScore(row.score, row.at), z, "user %d", row.user)
	}
	storetest.Wipe(t, r)
	again, _, err := s.Leaderboard(ctx, "tetris", 10)
	require.NoError(t, err)
	require.Equal(t, top, again)
}
