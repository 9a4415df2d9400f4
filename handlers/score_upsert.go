package handlers

import (
	"context"
	"errors"
	"log/slog"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// ScoreKeeper keeps each user's best run per game (doc/games.md,
// store.Scores.Upsert): MySQL keeps the maximum whatever the order of the
// messages, the leaderboard, user-meta hash and high-score cache follow
// it, and the consume idempotency key is set only once all of that is
// done. A run the game's rules refuse (game.CheckScore: an unknown game, a
// negative score or one no run of the game can make) or without a user
// goes to the DLQ; anything else is retried (15 s × 5).
type ScoreKeeper struct {
	scores *store.Scores
	log    *slog.Logger
}

// NewScoreKeeper returns the score consumer.
func NewScoreKeeper(scores *store.Scores, log *slog.Logger) *ScoreKeeper {
	if scores == nil || log == nil {
		panic("handlers: NewScoreKeeper: nil dependency")
	}
	return &ScoreKeeper{scores: scores, log: log}
}

func scoreUpsertConsumer(d Backends, log *slog.Logger) *ScoreKeeper {
	return NewScoreKeeper(store.NewScores(d.DB, d.Redis), log)
}

// Handle applies m.
func (h *ScoreKeeper) Handle(ctx context.Context, m topology.ScoreUpsert) error {
	res, err := h.scores.Upsert(ctx, m)
	if errors.Is(err, game.ErrScoreInvalid) {
		return messaging.Permanent(err)
	}
	if err != nil {
		return err
	}
	if res.AppliedBefore {
		h.log.DebugContext(ctx, "score applied before", "submitId", m.SubmitID)
		return nil
	}
	h.log.DebugContext(ctx, "score applied", "submitId", m.SubmitID, "gameId", m.GameID, "score", m.Score,
		"best", res.Best.Score, "improved", res.Improved, "locked", res.Locked)
	return nil
}
