package game_test

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/game"
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
		z := game.BoardScore(s, at)
		require.Equal(t, float64(s), math.Floor(z), "%d: the whole part", s)
		require.Equal(t, s, int64(z), "%d: a reader that truncates", s)
		text := strconv.FormatFloat(z, 'g', -1, 64)
		back, err := strconv.ParseFloat(text, 64)
		require.NoError(t, err)
		require.Equal(t, z, back, "%d: the text ZADD gets reads back the same", s)

		if s > 0 {
			require.Greater(t, game.BoardScore(s, end), game.BoardScore(s-1, epoch), "%d: a point beats any time", s)
		}
		require.GreaterOrEqual(t, game.BoardScore(s, epoch), z, "%d: the earliest run", s)
		require.GreaterOrEqual(t, z, game.BoardScore(s, end), "%d: the latest run", s)
		if s < 1<<53-1 && at+tick(s) <= end {
			require.Greater(t, z, game.BoardScore(s, at+tick(s)), "%d: a tick later ranks lower", s)
		}
	}
	require.Equal(t, game.BoardScore(5, 0), game.BoardScore(5, epoch), "before the clock starts: its start")
	require.Equal(t, game.BoardScore(5, math.MaxInt64), game.BoardScore(5, end), "past its end: its end")
	require.Equal(t, float64(1<<53), game.BoardScore(math.MaxInt64, epoch), "past 2^53: capped")
	require.Less(t, game.BoardScore(1<<53-1, epoch), game.BoardScore(1<<53, epoch))
}
