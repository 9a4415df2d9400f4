package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// The leaderboard of a game (doc/games.md, "The leaderboard"): read from
// its ZSET with each player's run, and rebuilt from MySQL when Redis lost it.

// boardSentinel is the member that marks a leaderboard being rebuilt; user
// ids are digits, so it is never a player.
const boardSentinel = "~rebuilding"

// LeaderboardEntry is one row of a leaderboard.
type LeaderboardEntry struct {
	Rank       int    `json:"rank"`
	UserID     int64  `json:"userId"`
	Username   string `json:"username,omitempty"`
	Score      int64  `json:"score"`
	DurationMs int64  `json:"durationMs"`
	Moves      int32  `json:"moves"`
	AchievedAt int64  `json:"achievedAt"` // epoch milliseconds
}

// Leaderboard returns the top limit (1..200) of game from its ZSET, best
// first (the higher score, then the run achieved first: game.BoardScore),
// with each player's run from the user-meta hash (MySQL's row, cached
// again, where the hash expired) and username. A board that is missing, or still
// marked as being rebuilt, is rebuilt from MySQL first (cold start);
// rebuilt says so.
func (s *Scores) Leaderboard(ctx context.Context, gameID string, limit int) (entries []LeaderboardEntry, rebuilt bool, err error) {
	if _, ok := game.Lookup(gameID); !ok {
		return nil, false, fmt.Errorf("%w: unknown game %q", game.ErrScoreInvalid, gameID)
	}
	limit = min(max(limit, 1), keys.LeaderboardSize)
	k, c := s.r.Keys(), s.client()
	board := k.Key(keys.Leaderboard, gameID)
	stale, err := scoreBoardScript.Run(ctx, c, []string{board}, boardSentinel).Int()
	if err != nil {
		return nil, false, fmt.Errorf("store: leaderboard %s: %w", gameID, err)
	}
	if stale == 1 {
		if err := s.rebuild(ctx, gameID); err != nil {
			return nil, false, err
		}
		rebuilt = true
	}
	top, err := c.ZRevRangeWithScores(ctx, board, 0, int64(limit)).Result()
	if err != nil {
		return nil, rebuilt, fmt.Errorf("store: leaderboard %s: %w", gameID, err)
	}
	var ids []int64
	for _, z := range top {
		member, _ := z.Member.(string)
		id, err := strconv.ParseInt(member, 10, 64)
		if err != nil || len(ids) == limit {
			continue // the sentinel of a rebuild running elsewhere
		}
		ids = append(ids, id)
		entries = append(entries, LeaderboardEntry{Rank: len(ids), UserID: id, Score: int64(z.Score)})
	}
	if len(entries) == 0 {
		return entries, rebuilt, nil
	}
	if err := s.fill(ctx, gameID, ids, entries); err != nil {
		return nil, rebuilt, err
	}
	// The ZSET ranks equal scores achieved within one tick of
	// game.BoardScore's clock by member; the runs' exact times put them in
	// order.
	slices.SortStableFunc(entries, func(a, b LeaderboardEntry) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.AchievedAt, b.AchievedAt), cmp.Compare(a.UserID, b.UserID))
	})
	for i := range entries {
		entries[i].Rank = i + 1
	}
	return entries, rebuilt, nil
}

// fill adds the run of each entry (from its meta hash, else MySQL, which
// fills the hash again) and the usernames.
func (s *Scores) fill(ctx context.Context, gameID string, ids []int64, entries []LeaderboardEntry) error {
	k, c := s.r.Keys(), s.client()
	metas := make([]*redis.MapStringStringCmd, len(entries))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entries {
			metas[i] = p.HGetAll(ctx, k.Key(keys.UserMeta, gameID, strconv.FormatInt(e.UserID, 10)))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: leaderboard %s meta: %w", gameID, err)
	}
	var missing []int64
	for i := range entries {
		if !applyMeta(&entries[i], metas[i].Val()) {
			missing = append(missing, entries[i].UserID)
		}
	}
	if len(missing) > 0 {
		var rows []GameScore
		if err := s.db.WithContext(ctx).Where("game_id = ? AND user_id IN ?", gameID, missing).Find(&rows).Error; err != nil {
			return fmt.Errorf("store: leaderboard %s rows: %w", gameID, err)
		}
		byUser := make(map[int64]GameScore, len(rows))
		for _, r := range rows {
			byUser[int64(r.UserID)] = r
		}
		if err := s.syncRows(ctx, rows); err != nil {
			return fmt.Errorf("store: leaderboard %s meta: %w", gameID, err)
		}
		for i, e := range entries {
			if r, ok := byUser[e.UserID]; ok && slices.Contains(missing, e.UserID) {
				entries[i].Score, entries[i].DurationMs, entries[i].Moves, entries[i].AchievedAt = r.Score, r.DurationMs, r.Moves, r.AchievedAt
			}
		}
	}
	var users []UserAccount
	if err := s.db.WithContext(ctx).Select("id", "username").Where("id IN ?", ids).Find(&users).Error; err != nil {
		return fmt.Errorf("store: leaderboard %s names: %w", gameID, err)
	}
	names := make(map[int64]string, len(users))
	for _, u := range users {
		names[int64(u.ID)] = u.Username
	}
	for i := range entries {
		entries[i].Username = names[entries[i].UserID]
	}
	return nil
}

// applyMeta sets e's run from a user-meta hash; false when the hash is
// missing or unreadable. The hash's score is exact where the ZSET's double
// is not (beyond 2^53).
func applyMeta(e *LeaderboardEntry, m map[string]string) bool {
	score, err1 := strconv.ParseInt(m["score"], 10, 64)
	dur, err2 := strconv.ParseInt(m["durationMs"], 10, 64)
	moves, err3 := strconv.ParseInt(m["moves"], 10, 32)
	at, err4 := strconv.ParseInt(m["achievedAt"], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return false
	}
	e.Score, e.DurationMs, e.Moves, e.AchievedAt = score, dur, int32(moves), at
	return true
}

// rebuild fills a leaderboard marked by score_board_mark.lua with the top
// of MySQL, merging (ZADD GT through score_sync.lua) with what consumers
// wrote meanwhile, then removes the mark and prunes.
func (s *Scores) rebuild(ctx context.Context, gameID string) error {
	var rows []GameScore
	// The board's order: the higher score, then the run achieved first
	// (idx_mini_game_score_game_rank serves it).
	err := s.db.WithContext(ctx).Where("game_id = ?", gameID).Order("score DESC, achieved_at, user_id").
		Limit(keys.LeaderboardSize).Find(&rows).Error
	if err != nil {
		return fmt.Errorf("store: rebuild leaderboard %s: %w", gameID, err)
	}
	if err := s.syncRows(ctx, rows); err != nil {
		return fmt.Errorf("store: rebuild leaderboard %s: %w", gameID, err)
	}
	// Only now is the board complete: a rebuild that failed above leaves
	// the mark, and the next read rebuilds again.
	board := s.r.Keys().Key(keys.Leaderboard, gameID)
	_, err = s.client().Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, board, boardSentinel)
		p.ZRemRangeByRank(ctx, board, 0, -(keys.LeaderboardSize + 1))
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: rebuild leaderboard %s: %w", gameID, err)
	}
	return nil
}
