package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// tieRun is a run of 500 points in snake by user, achieved at the given
// epoch millisecond.
func tieRun(user int64, submitID string, at, durationMs int64) topology.ScoreUpsert {
	return topology.ScoreUpsert{SubmitID: submitID, UserID: &user, GameID: "snake", Score: 500, DurationMs: durationMs,
		Moves: 100, AchievedAt: at, ClientVersion: "1.0"}
}

// Of a user's runs with equal scores, MySQL keeps the one achieved first
// (and of those achieved in the same millisecond, the lowest submit id),
// whatever order the messages come in: every order of three runs gives the
// same row, and so do many applied at once.
func TestEqualScoresKeepTheRunAchievedFirstInAnyOrder(t *testing.T) {
	t.Parallel()
	s, _, r := newScores(t)
	ctx := t.Context()
	base := time.Now().UnixMilli()
	runs := func(user int64) []topology.ScoreUpsert { // submit ids are unique across users
		return []topology.ScoreUpsert{
			tieRun(user, fmt.Sprint(user, "-b-early"), base, 10_000),
			tieRun(user, fmt.Sprint(user, "-a-late"), base+1000, 20_000), // a lower submit id, achieved later
			tieRun(user, fmt.Sprint(user, "-c-same-ms"), base, 30_000),   // achieved with b-early, a higher submit id
		}
	}
	orders := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for i, order := range orders {
		user := int64(i + 1)
		rs := runs(user)
		for _, j := range order {
			_, err := s.Upsert(ctx, rs[j])
			require.NoError(t, err)
		}
		row, err := s.Best(ctx, "snake", user)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(user, "-b-early"), row.SubmitID, "order %v", order)
		require.Equal(t, base, row.AchievedAt, "order %v", order)
		require.EqualValues(t, 10_000, row.DurationMs, "order %v: the run's own columns", order)
		meta := r.Client(keys.DBMiniGame).HGetAll(ctx, r.Keys().Key(keys.UserMeta, "snake", strconv.FormatInt(user, 10))).Val()
		require.Equal(t, strconv.FormatInt(base, 10), meta["achievedAt"], "order %v: the meta hash follows", order)
	}

	// Many at once, without the lock's help: the earliest stays.
	user := int64(100)
	many := make([]topology.ScoreUpsert, 60)
	first := many[0]
	for i := range many {
		many[i] = tieRun(user, fmt.Sprintf("m-%02d", i), base+rand.Int64N(1_000_000), int64(i))
		if i == 0 || many[i].AchievedAt < first.AchievedAt {
			first = many[i]
		}
	}
	var wg sync.WaitGroup
	for _, m := range many {
		wg.Go(func() {
			if _, err := s.Upsert(context.Background(), m); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	row, err := s.Best(ctx, "snake", user)
	require.NoError(t, err)
	require.Equal(t, first.SubmitID, row.SubmitID)
	require.Equal(t, first.AchievedAt, row.AchievedAt)
}

// On the leaderboard, equal scores rank by who achieved them first, not by
// user id as text ("9" above "100" above "10"): in the ZSET the consumers
// keep, whatever order their runs arrive in, and in one rebuilt from
// MySQL after Redis lost it.
func TestBoardRanksEqualScoresByWhoAchievedThemFirst(t *testing.T) {
	t.Parallel()
	s, _, r := newScores(t)
	ctx := t.Context()
	base := time.Now().UnixMilli()
	top := run(2, "snake", 800, 60_000, 100)
	_, err := s.Upsert(ctx, top)
	require.NoError(t, err)
	_, _, err = s.Leaderboard(ctx, "snake", 10) // the board exists: consumers write to it
	require.NoError(t, err)
	for _, m := range []topology.ScoreUpsert{tieRun(9, "t9", base+2000, 1), tieRun(100, "t100", base+1000, 1), tieRun(10, "t10", base, 1)} {
		_, err := s.Upsert(ctx, m)
		require.NoError(t, err)
	}
	zset := func() []string {
		members, err := r.Client(keys.DBMiniGame).ZRangeArgs(ctx, redis.ZRangeArgs{Key: r.Keys().Key(keys.Leaderboard, "snake"), Start: 0, Stop: -1, Rev: true}).Result()
		require.NoError(t, err)
		return members
	}
	read := func() []int64 {
		entries, _, err := s.Leaderboard(ctx, "snake", 10)
		require.NoError(t, err)
		var ids []int64
		for i, e := range entries {
			require.Equal(t, i+1, e.Rank)
			ids = append(ids, e.UserID)
		}
		return ids
	}
	require.Equal(t, []string{"2", "10", "100", "9"}, zset(), "the consumers' board")
	require.Equal(t, []int64{2, 10, 100, 9}, read())

	// A run of 9's achieved before all of them, delivered last: 9 moves up.
	_, err = s.Upsert(ctx, tieRun(9, "t9-earlier", base-500, 1))
	require.NoError(t, err)
	require.Equal(t, []string{"2", "9", "10", "100"}, zset())

	storetest.Wipe(t, r)
	require.Equal(t, []int64{2, 9, 10, 100}, read(), "rebuilt from MySQL")
	require.Equal(t, []string{"2", "9", "10", "100"}, zset(), "the rebuilt board")
}

// The consumer refuses a score that no run of the game can make in a
// session (doc/games.md): 2048's most is 60 points a move at 50 moves a
// second for 6 hours and 5 s, 64,815,000.
func TestUpsertRefusesAScoreNoRunOfTheGameCanMake(t *testing.T) {
	t.Parallel()
	s, _, _ := newScores(t)
	ctx := t.Context()
	_, err := s.Upsert(ctx, run(5, "2048", 64_815_001, 21_605_000, 1_080_250))
	require.ErrorIs(t, err, game.ErrScoreInvalid)
	_, err = s.Best(ctx, "2048", 5)
	require.ErrorIs(t, err, store.ErrNotFound, "nothing applied")
	_, err = s.Upsert(ctx, run(5, "2048", 64_815_000, 21_605_000, 1_080_250))
	require.NoError(t, err, "the most a session can score")
}
