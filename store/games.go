package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Scores are the mini game's best scores: mini_game_score in MySQL, the
// leaderboards, user-meta hashes, high-score caches, sessions and
// idempotency keys in Redis DB 14.
type Scores struct {
	db  *gorm.DB
	r   *Redis
	now func() time.Time
}

// NewScores returns the scores of db and r.
func NewScores(db *gorm.DB, r *Redis) *Scores { return &Scores{db: db, r: r, now: time.Now} }

func (s *Scores) client() *redis.Client { return s.r.Client(keys.DBMiniGame) }

func sessionValue(seed int64, startedAt time.Time) string {
	return strconv.FormatInt(seed, 10) + ":" + strconv.FormatInt(startedAt.UnixMilli(), 10)
}

// StartSession starts a session of game for user (game.NewSession):
// mg:score:session with "seed:startedAtMillis" for 6 hours.
func (s *Scores) StartSession(ctx context.Context, gameID string, userID int64) (game.Session, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	now := s.now().Truncate(time.Millisecond)
	sess, err := game.NewSession(uuid.NewString(), gameID, userID, int64(binary.BigEndian.Uint64(b[:])>>1), now)
	if err != nil {
		return game.Session{}, err
	}
	key := s.r.Keys().Key(keys.GameSession, gameID, strconv.FormatInt(userID, 10), sess.ID)
	if err := s.client().Set(ctx, key, sessionValue(sess.Seed, now), keys.GameSessionTTL).Err(); err != nil {
		return game.Session{}, fmt.Errorf("store: start %s session: %w", gameID, err)
	}
	return sess, nil
}

// Session returns the user's session of game, or ErrNotFound when it does
// not exist (never started, another user's, or expired).
func (s *Scores) Session(ctx context.Context, gameID string, userID int64, sessionID string) (game.Session, error) {
	key := s.r.Keys().Key(keys.GameSession, gameID, strconv.FormatInt(userID, 10), sessionID)
	v, err := s.client().Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return game.Session{}, fmt.Errorf("store: %s session %s: %w", gameID, sessionID, ErrNotFound)
	}
	if err != nil {
		return game.Session{}, fmt.Errorf("store: %s session %s: %w", gameID, sessionID, err)
	}
	seedText, startText, ok := strings.Cut(v, ":")
	seed, err1 := strconv.ParseInt(seedText, 10, 64)
	start, err2 := strconv.ParseInt(startText, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return game.Session{}, fmt.Errorf("store: %s session %s holds %q, not seed:startedAt", gameID, sessionID, v)
	}
	return game.NewSession(sessionID, gameID, userID, seed, time.UnixMilli(start))
}

// Upserted says what Upsert did.
type Upserted struct {
	Best          GameScore // the user's best run as MySQL holds it after the upsert
	Improved      bool      // this run is the best
	AppliedBefore bool      // the submission was applied before: nothing done
	Locked        bool      // the per-user lock was held (false: it ran without it)
}

// scoreLockWait is how long Upsert waits for the per-user lock before it
// goes on without it.
const scoreLockWait = 200 * time.Millisecond

// betterRun says, in an upsert of mini_game_score, that the new run beats
// the row's: a higher score; an equal one achieved earlier; or, achieved
// in the same millisecond, the lower submit id (compared as bytes), so that
// no two runs tie and every order of the messages leaves the same row.
const betterRun = "(VALUES(score) > score OR (VALUES(score) = score AND (VALUES(achieved_at) < achieved_at" +
	" OR (VALUES(achieved_at) = achieved_at AND CAST(VALUES(submit_id) AS BINARY) < CAST(submit_id AS BINARY)))))"

// Upsert applies a submitted run: the MySQL row keeps the user's best run
// (betterRun: the higher score, then the one achieved first; correct in
// any order and without a lock), then the Redis keys reflect that run
// (score_sync.lua: leaderboard ZADD GT of the run's BoardScore, pruned to
// the top 200 while the board exists, user-meta hash and high-score cache,
// never backwards). mg:score:applied (per user and submit id: two users'
// runs with one id are two runs) is set only after both, so a delivery
// that failed half way is applied in full when it comes back; one that
// succeeded is skipped. The per-user lock (mg:score:lock,
// 10 s, UUID, compare-and-delete) only keeps one user's submissions from
// contending for the row: Upsert waits for it briefly, then goes on
// without it. A score the game's rules refuse (game.CheckScore: an
// unknown game, a negative score, one above what any run of the game can
// make in a session) is refused, and so is a missing user.
func (s *Scores) Upsert(ctx context.Context, m topology.ScoreUpsert) (Upserted, error) {
	if err := game.CheckScore(m.GameID, m.Score); err != nil {
		return Upserted{}, err
	}
	if m.UserID == nil || *m.UserID <= 0 {
		return Upserted{}, fmt.Errorf("%w: a user id is required", game.ErrScoreInvalid)
	}
	k, c := s.r.Keys(), s.client()
	user := strconv.FormatInt(*m.UserID, 10)
	done := k.Key(keys.ScoreApplied, user, m.SubmitID)
	if n, err := c.Exists(ctx, done).Result(); err != nil {
		return Upserted{}, fmt.Errorf("store: score %s: %w", m.SubmitID, err)
	} else if n == 1 {
		return Upserted{AppliedBefore: true}, nil
	}
	var out Upserted
	lock, err := lease.AcquireWait(ctx, c, k.Key(keys.ScoreLock, m.GameID, user), keys.ScoreLockTTL, scoreLockWait)
	if err == nil {
		out.Locked = true
		defer lock.ReleaseDetached(ctx)
	} else if !errors.Is(err, lease.ErrHeld) {
		return Upserted{}, fmt.Errorf("store: score lock: %w", err)
	}

	// Each column takes the new run's value only when the new run is
	// better. MySQL assigns left to right, each assignment seeing the ones
	// before it, so the columns the comparison reads come last: submit_id
	// (a comparison that sees the new one decides as the old would, or the
	// two runs are tied up to their submit ids and achieved_at is equal),
	// then achieved_at, then the score.
	err = s.db.WithContext(ctx).Exec("INSERT INTO mini_game_score (user_id, game_id, score, duration_ms, moves, achieved_at, submit_id, client_version)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE"+
		" duration_ms = IF("+betterRun+", VALUES(duration_ms), duration_ms),"+
		" moves = IF("+betterRun+", VALUES(moves), moves),"+
		" client_version = IF("+betterRun+", VALUES(client_version), client_version),"+
		" submit_id = IF("+betterRun+", VALUES(submit_id), submit_id),"+
		" achieved_at = IF("+betterRun+", VALUES(achieved_at), achieved_at),"+
		" score = GREATEST(score, VALUES(score))",
		*m.UserID, m.GameID, m.Score, m.DurationMs, m.Moves, m.AchievedAt, m.SubmitID, m.ClientVersion).Error
	if err != nil {
		return Upserted{}, fmt.Errorf("store: upsert score %s: %w", m.SubmitID, err)
	}
	if err := s.db.WithContext(ctx).Where("user_id = ? AND game_id = ?", *m.UserID, m.GameID).Take(&out.Best).Error; err != nil {
		return Upserted{}, fmt.Errorf("store: read score of user %s in %s: %w", user, m.GameID, err)
	}
	out.Improved = out.Best.SubmitID == m.SubmitID
	if err := s.sync(ctx, c, out.Best).Err(); err != nil {
		return Upserted{}, fmt.Errorf("store: sync score %s to Redis: %w", m.SubmitID, err)
	}
	if err := c.Set(ctx, done, "1", keys.ScoreSubmitTTL).Err(); err != nil {
		return out, fmt.Errorf("store: score %s applied; marking it done failed: %w", m.SubmitID, err)
	}
	return out, nil
}

// sync runs score_sync.lua for a best run (on c or a pipeline): every
// writer of the leaderboard, consumer and rebuild, ranks a run by its
// BoardScore here.
func (s *Scores) sync(ctx context.Context, c redis.Scripter, best GameScore) *redis.Cmd {
	k := s.r.Keys()
	user := strconv.FormatUint(best.UserID, 10)
	return scoreSyncScript.Run(ctx, c,
		[]string{k.Key(keys.Leaderboard, best.GameID), k.Key(keys.UserMeta, best.GameID, user), k.Key(keys.HighScore, best.GameID, user)},
		user, best.Score, best.DurationMs, best.Moves, best.AchievedAt,
		int64(keys.UserMetaTTL/time.Second), int64(keys.HighScoreTTL/time.Second), keys.LeaderboardSize,
		boardScoreText(best.Score, best.AchievedAt))
}

// syncRows runs score_sync.lua for each best run in one pipeline. A
// pipelined EVALSHA does not fall back to EVAL by itself: after NOSCRIPT
// (the server lost its script cache, as after a restart, when boards are
// rebuilt) it loads the script and goes again, once. The script never moves
// a score backwards, so the rows the first attempt synced are unchanged.
func (s *Scores) syncRows(ctx context.Context, rows []GameScore) error {
	c := s.client()
	send := func() error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, r := range rows {
				s.sync(ctx, p, r)
			}
			return nil
		})
		return err
	}
	err := send()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		if lerr := scoreSyncScript.Load(ctx, c).Err(); lerr != nil {
			return lerr
		}
		err = send()
	}
	return err
}

// Best returns a user's best run in game from MySQL, or ErrNotFound.
func (s *Scores) Best(ctx context.Context, gameID string, userID int64) (GameScore, error) {
	var row GameScore
	err := s.db.WithContext(ctx).Where("user_id = ? AND game_id = ?", userID, gameID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, fmt.Errorf("store: score of user %d in %s: %w", userID, gameID, ErrNotFound)
	}
	return row, err
}

// UserBest is a user's best score in a game, by name.
type UserBest struct {
	Username string
	GameID   string
	Score    int64
}

// BestsOf returns the best scores in MySQL of the users named, every game.
func (s *Scores) BestsOf(ctx context.Context, usernames []string) ([]UserBest, error) {
	var rows []UserBest
	err := s.db.WithContext(ctx).Raw(`SELECT u.username, s.game_id, s.score FROM mini_game_score s
		JOIN user_account u ON u.id = s.user_id WHERE u.username IN ?`, usernames).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: scores of %d users: %w", len(usernames), err)
	}
	return rows, nil
}

// Bests returns the best runs in MySQL of the users userIDs in game.
func (s *Scores) Bests(ctx context.Context, gameID string, userIDs []int64) ([]GameScore, error) {
	var rows []GameScore
	if err := s.db.WithContext(ctx).Where("game_id = ? AND user_id IN ?", gameID, userIDs).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: scores of %d users in %s: %w", len(userIDs), gameID, err)
	}
	return rows, nil
}
