package store

import (
	"strconv"

	"github.com/eisland/isle/game"
)

// boardScoreText is game.BoardScore, the leaderboard's order packed into
// one double (doc/games.md, "The leaderboard"), as the text ZADD reads
// back to the same double.
func boardScoreText(score, achievedAt int64) string {
	return strconv.FormatFloat(game.BoardScore(score, achievedAt), 'g', -1, 64)
}
