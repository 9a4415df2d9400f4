package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

func newScores(t *testing.T) (*store.Scores, *gorm.DB, *store.Redis) {
	t.Helper()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	return store.NewScores(db, r), db, r
}

func run(user int64, game string, score, dur int64, moves int32) topology.ScoreUpsert {
	return topology.ScoreUpsert{SubmitID: fmt.Sprintf("s-%d-%s-%d-%d-%d", user, game, score, dur, rand.Int64()), UserID: &user,
		GameID: game, Score: score, DurationMs: dur, Moves: moves, AchievedAt: time.Now().UnixMilli(), ClientVersion: "1.0"}
}

// boardOf reads the game's ZSET as member → score.
func boardOf(t *testing.T, r *store.Redis, game string) map[string]float64 {
	t.Helper()
	zs, err := r.Client(keys.DBMiniGame).ZRangeWithScores(t.Context(), r.Keys().Key(keys.Leaderboard, game), 0, -1).Result()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, z := range zs {
		out[z.Member.(string)] = z.Score
	}
	return out
}

func TestConcurrentRunsKeepTheBestEverywhere(t *testing.T) {
	t.Parallel()
	s, _, r := newScores(t)
	ctx := t.Context()
	_, err := s.Upsert(ctx, run(7, "2048", 1, 1000, 10))
	require.NoError(t, err)
	_, _, err = s.Leaderboard(ctx, "2048", 10) // the board exists from now on: consumers write to it
	require.NoError(t, err)

	runs := make([]topology.ScoreUpsert, 200)
	best := runs[0]
	for i := range runs {
		runs[i] = run(7, "2048", rand.Int64N(1_000_000), 60_000+int64(i), int32(100+i))
		if runs[i].Score > best.Score {
			best = runs[i]
		}
	}
	var wg sync.WaitGroup
	for _, m := range runs {
		wg.Go(func() {
			if _, err := s.Upsert(context.Background(), m); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	row, err := s.Best(ctx, "2048", 7)
	require.NoError(t, err)
	require.Equal(t, best.Score, row.Score)
	require.Equal(t, best.SubmitID, row.SubmitID, "the best run's columns, not another's")
	require.Equal(t, best.DurationMs, row.DurationMs)
	require.Equal(t, best.Moves, row.Moves)
	// The board holds the run's BoardScore: the score, and a fraction for
	// when it was achieved.
	require.Equal(t, float64(best.Score), math.Floor(boardOf(t, r, "2048")["7"]))
	require.Equal(t, game.BoardScore(best.Score, best.AchievedAt), boardOf(t, r, "2048")["7"])

	c, k := r.Client(keys.DBMiniGame), r.Keys()
	meta, err := c.HGetAll(ctx, k.Key(keys.UserMeta, "2048", "7")).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"score": strconv.FormatInt(best.Score, 10), "durationMs": strconv.FormatInt(best.DurationMs, 10),
		"moves": strconv.Itoa(int(best.Moves)), "achievedAt": strconv.FormatInt(best.AchievedAt, 10)}, meta)
	require.Equal(t, strconv.FormatInt(best.Score, 10), c.Get(ctx, k.Key(keys.HighScore, "2048", "7")).Val())
	ttl := c.TTL(ctx, k.Key(keys.UserMeta, "2048", "7")).Val()
	require.InDelta(t, keys.UserMetaTTL.Seconds(), ttl.Seconds(), 5)
}

// The Spring backend's consumer set its idempotency key before the work: a first
// attempt that failed looked done on retry. Here the first attempt times
// out on a row another transaction holds, and the retry applies it.
func TestRunWhoseFirstAttemptFailedIsAppliedOnRetry(t *testing.T) {
	t.Parallel()
	s, db, r := newScores(t)
	ctx := t.Context()
	_, err := s.Upsert(ctx, run(9, "snake", 10, 10_000, 100))
	require.NoError(t, err)

	tx := db.Begin()
	var held store.GameScore
	require.NoError(t, tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("user_id = ?", 9).Take(&held).Error)
	m := run(9, "snake", 500, 20_000, 400)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.Upsert(short, m)
	cancel()
	require.Error(t, err, "the row is locked: the first attempt fails after the idempotency check")
	require.NoError(t, tx.Rollback().Error)
	require.Zero(t, r.Client(keys.DBMiniGame).Exists(ctx, r.Keys().Key(keys.ScoreApplied, "9", m.SubmitID)).Val(), "not marked done")

	got, err := s.Upsert(ctx, m)
	require.NoError(t, err)
	require.False(t, got.AppliedBefore, "the retry does the work")
	require.True(t, got.Improved)
	require.EqualValues(t, 500, got.Best.Score)
	again, err := s.Upsert(ctx, m)
	require.NoError(t, err)
	require.True(t, again.AppliedBefore, "a delivery after the success is skipped")
}

func TestLeaderboardRebuiltFromMySQLAfterRedisLosesIt(t *testing.T) {
	t.Parallel()
	s, db, r := newScores(t)
	ctx := t.Context()
	for u := int64(1); u <= 12; u++ {
		require.NoError(t, db.Create(&store.UserAccount{Username: fmt.Sprintf("player%02d", u)}).Error)
		_, err := s.Upsert(ctx, run(u, "tetris", u*1000, 100_000, int32(u*10)))
		require.NoError(t, err)
	}
	storetest.Wipe(t, r) // every key of the game gone

	top, rebuilt, err := s.Leaderboard(ctx, "tetris", 5)
	require.NoError(t, err)
	require.True(t, rebuilt)
	require.Len(t, top, 5)
	var rows []store.GameScore
	require.NoError(t, db.Where("game_id = ?", "tetris").Order("score DESC").Limit(5).Find(&rows).Error)
	for i, e := range top {
		require.Equal(t, i+1, e.Rank)
		require.EqualValues(t, rows[i].UserID, e.UserID)
		require.Equal(t, rows[i].Score, e.Score)
		require.Equal(t, rows[i].Moves, e.Moves)
		require.Equal(t, rows[i].AchievedAt, e.AchievedAt)
		require.Equal(t, fmt.Sprintf("player%02d", e.UserID), e.Username)
	}
	require.Len(t, boardOf(t, r, "tetris"), 12, "the whole board, not only the page read")

	_, rebuilt, err = s.Leaderboard(ctx, "tetris", 5)
	require.NoError(t, err)
	require.False(t, rebuilt, "built once")

	// A rebuild that died left its sentinel: the next read rebuilds.
	c, k := r.Client(keys.DBMiniGame), r.Keys()
	require.NoError(t, c.Del(ctx, k.Key(keys.Leaderboard, "tetris")).Err())
	require.NoError(t, c.ZAdd(ctx, k.Key(keys.Leaderboard, "tetris"), redis.Z{Score: math.Inf(-1), Member: "~rebuilding"}, redis.Z{Score: 5, Member: "1"}).Err())
	top, rebuilt, err = s.Leaderboard(ctx, "tetris", 20)
	require.NoError(t, err)
	require.True(t, rebuilt)
	require.Len(t, top, 12)
	require.NotContains(t, boardOf(t, r, "tetris"), "~rebuilding")
}

// A board is rebuilt (and a run's details cached again) when the server
// lost its script cache too, as after a restart: the pipelined EVALSHA of
// score_sync.lua loads the script after NOSCRIPT. Not parallel: SCRIPT
// FLUSH is server-wide.
func TestLeaderboardRebuiltAfterScriptFlush(t *testing.T) {
	s, db, r := newScores(t)
	ctx := t.Context()
	for u := int64(1); u <= 3; u++ {
		require.NoError(t, db.Create(&store.UserAccount{Username: fmt.Sprintf("flush%02d", u)}).Error)
		_, err := s.Upsert(ctx, run(u, "snake", u*100, 100_000, int32(u*10)))
		require.NoError(t, err)
	}
	storetest.Wipe(t, r)
	require.NoError(t, r.Client(keys.DBMiniGame).ScriptFlush(ctx).Err())
	top, rebuilt, err := s.Leaderboard(ctx, "snake", 10)
	require.NoError(t, err)
	require.True(t, rebuilt)
	require.Len(t, top, 3)
	require.EqualValues(t, 3, top[0].UserID)
	require.EqualValues(t, 30, top[0].Moves, "the run's details")
	require.NotContains(t, boardOf(t, r, "snake"), "~rebuilding")

	// A page whose details expired fills them again from MySQL, also after
	// a flush.
	c, k := r.Client(keys.DBMiniGame), r.Keys()
	require.NoError(t, c.Del(ctx, k.Key(keys.UserMeta, "snake", "2")).Err())
	require.NoError(t, c.ScriptFlush(ctx).Err())
	top, rebuilt, err = s.Leaderboard(ctx, "snake", 10)
	require.NoError(t, err)
	require.False(t, rebuilt)
	require.EqualValues(t, 20, top[1].Moves)
	require.EqualValues(t, 1, c.Exists(ctx, k.Key(keys.UserMeta, "snake", "2")).Val())
}

func TestLeaderboardHoldsExactlyTheTop200(t *testing.T) {
	t.Parallel()
	s, _, r := newScores(t)
	ctx := t.Context()
	for u := int64(1); u <= 230; u++ {
		_, err := s.Upsert(ctx, run(u, "2048", u*10, 100_000, 1000))
		require.NoError(t, err)
	}
	top, _, err := s.Leaderboard(ctx, "2048", 500)
	require.NoError(t, err)
	require.Len(t, top, 200)
	require.EqualValues(t, 230, top[0].UserID)
	require.EqualValues(t, 31, top[199].UserID)

	// With the board there, consumers keep it at 200.
	for u := int64(231); u <= 260; u++ {
		_, err := s.Upsert(ctx, run(u, "2048", u*10, 100_000, 1000))
		require.NoError(t, err)
	}
	board := boardOf(t, r, "2048")
	require.Len(t, board, 200)
	require.Contains(t, board, "260")
	require.NotContains(t, board, "60", "pushed out")
	require.Contains(t, board, "61")
}

func TestSessionsAndSubmitClaims(t *testing.T) {
	t.Parallel()
	s, _, r := newScores(t)
	ctx := t.Context()
	sess, err := s.StartSession(ctx, "snake", 3)
	require.NoError(t, err)
	got, err := s.Session(ctx, "snake", 3, sess.ID)
	require.NoError(t, err)
	require.Equal(t, sess.Seed, got.Seed)
	require.True(t, sess.StartedAt.Equal(got.StartedAt))
	_, err = s.Session(ctx, "snake", 4, sess.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another user's session")
	_, err = s.StartSession(ctx, "chess", 3)
	require.ErrorIs(t, err, game.ErrScoreInvalid)

	first, c, err := s.ClaimRun(ctx, sess, "sub-1", []byte(`{"a":1}`))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, c)
	again, c, err := s.ClaimRun(ctx, sess, "sub-1", []byte(`{"a":2}`))
	require.NoError(t, err)
	require.Equal(t, store.SubmitIDUsed, c)
	require.Equal(t, first, again, "the first acceptance")
	require.NoError(t, s.ReleaseRun(ctx, sess, "sub-1", []byte(`{"a":2}`)), "not its value: kept")
	_, c, _ = s.ClaimRun(ctx, sess, "sub-1", []byte(`{"a":3}`))
	require.Equal(t, store.SubmitIDUsed, c)
	require.NoError(t, s.ReleaseRun(ctx, sess, "sub-1", first))
	third, c, _ := s.ClaimRun(ctx, sess, "sub-1", []byte(`{"a":3}`))
	require.Equal(t, store.Claimed, c, "released after a failed publish")

	// The session went with the submit id: another run on it is refused
	// with the run that used it; a session that expired is gone.
	used, c, err := s.ClaimRun(ctx, sess, "sub-2", []byte(`{"a":4}`))
	require.NoError(t, err)
	require.Equal(t, store.SessionUsed, c)
	require.Equal(t, third, used)
	_, c, err = s.ClaimRun(ctx, game.Session{ID: "gone", GameID: "snake", UserID: 3}, "sub-3", []byte(`{"a":5}`))
	require.NoError(t, err)
	require.Equal(t, store.SessionGone, c)
	require.Equal(t, int64(0), r.Client(keys.DBMiniGame).Exists(ctx, r.Keys().Key(keys.ScoreClaim, "3", "sub-3")).Val(), "nothing claimed")

	// A released run leaves the session to any run: it was not accepted.
	other, err := s.StartSession(ctx, "snake", 3)
	require.NoError(t, err)
	_, c, _ = s.ClaimRun(ctx, other, "sub-4", []byte(`{"a":6}`))
	require.Equal(t, store.Claimed, c)
	require.NoError(t, s.ReleaseRun(ctx, other, "sub-4", []byte(`{"a":6}`)))
	_, c, _ = s.ClaimRun(ctx, other, "sub-5", []byte(`{"a":7}`))
	require.Equal(t, store.Claimed, c)
	ttl := r.Client(keys.DBMiniGame).PTTL(ctx, r.Keys().Key(keys.GameSessionUsed, "snake", "3", other.ID)).Val()
	require.True(t, ttl > keys.GameSessionTTL-time.Minute && ttl <= keys.GameSessionTTL, "used while the session lives: %s", ttl)
}

// A submit id is its user's: two users' runs with one id are both claimed,
// and each user's id still takes one run. A release undoes its own user's
// claim only.
func TestSubmitIDsAreScopedToTheirUser(t *testing.T) {
	t.Parallel()
	s, _, _ := newScores(t)
	ctx := t.Context()
	mine, err := s.StartSession(ctx, "snake", 3)
	require.NoError(t, err)
	theirs, err := s.StartSession(ctx, "snake", 4)
	require.NoError(t, err)

	_, c, err := s.ClaimRun(ctx, theirs, "same", []byte(`{"user":4}`))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, c)
	_, c, err = s.ClaimRun(ctx, mine, "same", []byte(`{"user":3}`))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, c, "another user's claim on the id is no claim on mine")
	require.NoError(t, s.ReleaseRun(ctx, theirs, "same", []byte(`{"user":3}`)))
	again, err := s.StartSession(ctx, "snake", 3)
	require.NoError(t, err)
	first, c, err := s.ClaimRun(ctx, again, "same", []byte(`{"user":3,"again":true}`))
	require.NoError(t, err)
	require.Equal(t, store.SubmitIDUsed, c, "one run an id and user")
	require.JSONEq(t, `{"user":3}`, string(first))
}

// The consumer's idempotency is per user too: one id sent by two users is
// two runs, each applied once.
func TestRunsOfTwoUsersWithOneSubmitIDAreBothApplied(t *testing.T) {
	t.Parallel()
	s, _, _ := newScores(t)
	ctx := t.Context()
	for _, user := range []int64{3, 4} {
		m := run(user, "snake", 40+user, 10_000, 100)
		m.SubmitID = "same"
		got, err := s.Upsert(ctx, m)
		require.NoError(t, err)
		require.False(t, got.AppliedBefore, "user %d's run is applied", user)
		require.Equal(t, 40+user, got.Best.Score)
		got, err = s.Upsert(ctx, m)
		require.NoError(t, err)
		require.True(t, got.AppliedBefore, "user %d's run is applied once", user)
	}
}

// Across the deploy that scoped submit ids to their user: a claim of the
// global key an earlier API wrote (mg:score:idempotency:{submitId}, the
// acceptance as JSON) still holds for its own user while it lives, and
// for no other.
func TestClaimsOfTheGlobalKeyHoldForTheirUser(t *testing.T) {
	t.Parallel()
	s, _, r := newScores(t)
	ctx := t.Context()
	c, k := r.Client(keys.DBMiniGame), r.Keys()
	old := []byte(`{"submitId":"old-1","gameId":"snake","sessionId":"s0","userId":3,"score":10,"accepted":true}`)
	require.NoError(t, c.Set(ctx, k.Key(keys.ScoreSubmitOnce, "old-1"), old, keys.ScoreSubmitTTL).Err())
	require.NoError(t, c.Set(ctx, k.Key(keys.ScoreSubmitOnce, "spring-1"), "1", keys.ScoreSubmitTTL).Err())

	sess := func(user int64) game.Session {
		g, err := s.StartSession(ctx, "snake", user)
		require.NoError(t, err)
		return g
	}
	first, claim, err := s.ClaimRun(ctx, sess(3), "old-1", []byte(`{"new":3}`))
	require.NoError(t, err)
	require.Equal(t, store.SubmitIDUsed, claim, "the user's own claim from before the deploy")
	require.Equal(t, old, first)
	_, claim, err = s.ClaimRun(ctx, sess(4), "old-1", []byte(`{"new":4}`))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, claim, "another user's is no claim on the id")
	_, claim, err = s.ClaimRun(ctx, sess(4), "spring-1", []byte(`{"new":4}`))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, claim, "a claim that names no user holds for none")
}
