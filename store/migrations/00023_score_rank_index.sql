-- The leaderboard ranks equal scores by who achieved them first
-- (doc/games.md): its rebuild from MySQL reads a game's top 200 ordered by
-- score (highest first), then achieved_at, then user_id. This index serves
-- that order, so the read stops after 200 entries instead of sorting every
-- row of the game; it replaces the index on (game_id, score), a prefix of
-- the new one.

-- +goose Up
ALTER TABLE mini_game_score
  ADD KEY idx_mini_game_score_game_rank (game_id, score DESC, achieved_at, user_id),
  DROP INDEX idx_mini_game_score_game_score;

-- +goose Down
ALTER TABLE mini_game_score
  ADD KEY idx_mini_game_score_game_score (game_id, score),
  DROP INDEX idx_mini_game_score_game_rank;
