package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/lease"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// A Game is a mini game Isle keeps scores for, with what a plausible run
// of it looks like (SPEC 4.5: the server checks a submission against the
// session it was played in).
type Game struct {
	ID string
	// MinMoveMs is the least time a move takes: a run of n moves lasts at
	// least n × MinMoveMs.
	MinMoveMs int64
	// MaxScorePerMove bounds the score a move can add (2048: a merge of
	// two 65,536 tiles, with margin); 0 means unbounded.
	MaxScorePerMove int64
}

// games are the games of eIsland's client (seed 002, Domain 6).
var games = map[string]Game{
	"2048":   {ID: "2048", MinMoveMs: 20, MaxScorePerMove: 1 << 18},
	"tetris": {ID: "tetris", MinMoveMs: 10, MaxScorePerMove: 10_000},
	"snake":  {ID: "snake", MinMoveMs: 10, MaxScorePerMove: 1_000},
}

// LookupGame returns the game named id.
func LookupGame(id string) (Game, bool) {
	g, ok := games[id]
	return g, ok
}

// GameIDs lists the games, sorted.
func GameIDs() []string {
	ids := make([]string, 0, len(games))
	for id := range games {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ErrScoreInvalid is returned (wrapped, with the reason) for a submission
// that does not fit its game or session.
var ErrScoreInvalid = errors.New("store: implausible score")

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

// GameSession is one game played by a user: the seed the client plays
// with and when it started. A score is submitted against it.
type GameSession struct {
	ID        string
	GameID    string
	UserID    int64
	Seed      int64
	StartedAt time.Time
	ExpiresAt time.Time
}

func (s *Scores) client() *redis.Client { return s.r.Client(keys.DBMiniGame) }

func sessionValue(seed int64, startedAt time.Time) string {
	return strconv.FormatInt(seed, 10) + ":" + strconv.FormatInt(startedAt.UnixMilli(), 10)
}

// StartSession starts a session of game for user: mg:score:session with
// "seed:startedAtMillis" for 6 hours.
func (s *Scores) StartSession(ctx context.Context, gameID string, userID int64) (GameSession, error) {
	if _, ok := LookupGame(gameID); !ok {
		return GameSession{}, fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, gameID)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	now := s.now().Truncate(time.Millisecond)
	sess := GameSession{ID: uuid.NewString(), GameID: gameID, UserID: userID, Seed: int64(binary.BigEndian.Uint64(b[:]) >> 1),
		StartedAt: now, ExpiresAt: now.Add(keys.GameSessionTTL)}
	key := s.r.Keys().Key(keys.GameSession, gameID, strconv.FormatInt(userID, 10), sess.ID)
	if err := s.client().Set(ctx, key, sessionValue(sess.Seed, now), keys.GameSessionTTL).Err(); err != nil {
		return GameSession{}, fmt.Errorf("store: start %s session: %w", gameID, err)
	}
	return sess, nil
}

// Session returns the user's session of game, or ErrNotFound when it does
// not exist (never started, another user's, or expired).
func (s *Scores) Session(ctx context.Context, gameID string, userID int64, sessionID string) (GameSession, error) {
	key := s.r.Keys().Key(keys.GameSession, gameID, strconv.FormatInt(userID, 10), sessionID)
	v, err := s.client().Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return GameSession{}, fmt.Errorf("store: %s session %s: %w", gameID, sessionID, ErrNotFound)
	}
	if err != nil {
		return GameSession{}, fmt.Errorf("store: %s session %s: %w", gameID, sessionID, err)
	}
	seedText, startText, ok := strings.Cut(v, ":")
	seed, err1 := strconv.ParseInt(seedText, 10, 64)
	start, err2 := strconv.ParseInt(startText, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return GameSession{}, fmt.Errorf("store: %s session %s holds %q, not seed:startedAt", gameID, sessionID, v)
	}
	started := time.UnixMilli(start)
	return GameSession{ID: sessionID, GameID: gameID, UserID: userID, Seed: seed, StartedAt: started,
		ExpiresAt: started.Add(keys.GameSessionTTL)}, nil
}

// sessionSlack is how far a run's duration may exceed the time since its
// session started: the client's clock and the request's travel.
const sessionSlack = 5 * time.Second

// CheckRun says whether a run of score points, durationMs and moves fits
// the game and the session at now; the error wraps ErrScoreInvalid.
func CheckRun(sess GameSession, score, durationMs int64, moves int32, now time.Time) error {
	g, ok := LookupGame(sess.GameID)
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, sess.GameID)
	case score < 0 || durationMs < 0 || moves < 0:
		return fmt.Errorf("%w: score, duration and moves must not be negative", ErrScoreInvalid)
	case time.Duration(durationMs)*time.Millisecond > now.Sub(sess.StartedAt)+sessionSlack:
		return fmt.Errorf("%w: a run of %d ms in a session started %s ago", ErrScoreInvalid, durationMs, now.Sub(sess.StartedAt).Round(time.Second))
	case int64(moves) > 0 && durationMs/int64(moves) < g.MinMoveMs:
		return fmt.Errorf("%w: %d moves in %d ms, faster than %d ms a move", ErrScoreInvalid, moves, durationMs, g.MinMoveMs)
	case g.MaxScorePerMove > 0 && score > 0 && (moves == 0 || score/int64(moves) > g.MaxScorePerMove):
		return fmt.Errorf("%w: %d points in %d moves", ErrScoreInvalid, score, moves)
	}
	return nil
}

// ClaimSubmit records the first acceptance of submitID for 24 hours
// (mg:score:idempotency, SET NX) and returns true; for a submit id seen
// before it returns false and the first acceptance.
func (s *Scores) ClaimSubmit(ctx context.Context, submitID string, acceptance []byte) (first []byte, claimed bool, err error) {
	key := s.r.Keys().Key(keys.ScoreSubmitOnce, submitID)
	ok, err := s.client().SetNX(ctx, key, acceptance, keys.ScoreSubmitTTL).Result()
	if err != nil {
		return nil, false, fmt.Errorf("store: claim submit %s: %w", submitID, err)
	}
	if ok {
		return acceptance, true, nil
	}
	v, err := s.client().Get(ctx, key).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, fmt.Errorf("store: submit %s: %w", submitID, err)
	}
	return v, false, nil
}

// ReleaseSubmit forgets a claimed submit id whose message could not be
// published, so the client's retry is accepted; only while it still holds
// acceptance.
func (s *Scores) ReleaseSubmit(ctx context.Context, submitID string, acceptance []byte) error {
	key := s.r.Keys().Key(keys.ScoreSubmitOnce, submitID)
	return lease.CompareAndDelete(ctx, s.client(), key, string(acceptance))
}

// Upserted says what Upsert did.
type Upserted struct {
	Best     GameScore // the user's best run as MySQL holds it after the upsert
	Improved bool      // this run is the best
	Done     bool      // the submission was applied before: nothing done
	Locked   bool      // the per-user lock was held (false: it ran without it)
}

// scoreLockWait is how long Upsert waits for the per-user lock before it
// goes on without it.
const scoreLockWait = 200 * time.Millisecond

// Upsert applies a submitted run: the MySQL row keeps the user's best
// (INSERT ... ON DUPLICATE KEY UPDATE with GREATEST, correct in any order
// and without a lock), then the Redis keys reflect that best
// (score_sync.lua: leaderboard ZADD GT pruned to the top 200 while the
// board exists, user-meta hash and high-score cache, never backwards).
// mg:score:consume:idempotency is set only after both, so a delivery that
// failed half way is applied in full when it comes back; one that
// succeeded is skipped. The per-user lock (mg:score:lock, 10 s, UUID,
// compare-and-delete) only keeps one user's submissions from contending
// for the row: Upsert waits for it briefly, then goes on without it.
func (s *Scores) Upsert(ctx context.Context, m topology.ScoreUpsert) (Upserted, error) {
	if _, ok := LookupGame(m.GameID); !ok {
		return Upserted{}, fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, m.GameID)
	}
	if m.UserID == nil || *m.UserID <= 0 || m.Score < 0 {
		return Upserted{}, fmt.Errorf("%w: user id and a score >= 0 are required", ErrScoreInvalid)
	}
	k, c := s.r.Keys(), s.client()
	done := k.Key(keys.ScoreConsumeOnce, m.SubmitID)
	if n, err := c.Exists(ctx, done).Result(); err != nil {
		return Upserted{}, fmt.Errorf("store: score %s: %w", m.SubmitID, err)
	} else if n == 1 {
		return Upserted{Done: true}, nil
	}
	user := strconv.FormatInt(*m.UserID, 10)
	var out Upserted
	lock, err := lease.AcquireWait(ctx, c, k.Key(keys.ScoreLock, m.GameID, user), keys.ScoreLockTTL, scoreLockWait)
	if err == nil {
		out.Locked = true
		defer lock.ReleaseDetached(ctx)
	} else if !errors.Is(err, lease.ErrHeld) {
		return Upserted{}, fmt.Errorf("store: score lock: %w", err)
	}

	// The run's columns first, each taking the new value only when the new
	// score beats the old: MySQL assigns left to right, and the score last,
	// so the comparisons see the old one.
	better := "VALUES(score) > score"
	err = s.db.WithContext(ctx).Exec("INSERT INTO mini_game_score (user_id, game_id, score, duration_ms, moves, achieved_at, submit_id, client_version)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE"+
		" duration_ms = IF("+better+", VALUES(duration_ms), duration_ms),"+
		" moves = IF("+better+", VALUES(moves), moves),"+
		" achieved_at = IF("+better+", VALUES(achieved_at), achieved_at),"+
		" submit_id = IF("+better+", VALUES(submit_id), submit_id),"+
		" client_version = IF("+better+", VALUES(client_version), client_version),"+
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

// sync runs score_sync.lua for a best run (on c or a pipeline).
func (s *Scores) sync(ctx context.Context, c redis.Scripter, best GameScore) *redis.Cmd {
	k := s.r.Keys()
	user := strconv.FormatUint(best.UserID, 10)
	return scoreSyncScript.Run(ctx, c,
		[]string{k.Key(keys.Leaderboard, best.GameID), k.Key(keys.UserMeta, best.GameID, user), k.Key(keys.HighScore, best.GameID, user)},
		user, best.Score, best.DurationMs, best.Moves, best.AchievedAt,
		int64(keys.UserMetaTTL/time.Second), int64(keys.HighScoreTTL/time.Second), keys.LeaderboardSize)
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
