package game

import "math/bits"

// The leaderboard's order (doc/games.md, "The leaderboard"): the higher
// score first and, of equal scores, the one achieved first. The board
// holds one double a player, so BoardScore packs both into it exactly.
const (
	// boardEpochMs is where the leaderboard's clock starts,
	// 2020-01-01T00:00:00Z: a run achieved before counts as achieved then.
	boardEpochMs = 1_577_836_800_000
	// boardClockBits is the span of that clock, 2^41 ms (69.7 years, to
	// September 2089): a run achieved later counts as achieved then.
	boardClockBits = 41
	// exactBits is how many bits of a whole number a double holds exactly.
	exactBits = 53
)

// BoardScore is a run's score on the leaderboard: score plus a fraction in
// [0, 1) that falls as achievedAt (epoch ms) rises. The whole part stays
// the score (a reader that truncates reads it), a higher score always
// ranks higher, and of equal scores the earlier run has the larger
// fraction. Every value is a double exactly: a score of b bits leaves
// 53 − b bits of fraction, so the clock is read to 1 ms below 4,096 points
// and to 2^(b−12) ms above (256 ms at a million); equal scores achieved
// within one such tick tie. A score of 2^53 or more (no game's runs come
// near) has no fraction and is capped there.
func BoardScore(score, achievedAt int64) float64 {
	if score >= 1<<exactBits {
		return 1 << exactBits
	}
	score = max(score, 0)
	at := min(max(achievedAt-boardEpochMs, 0), 1<<boardClockBits-1)
	later := uint64(1<<boardClockBits - 1 - at) // falls as the run is later
	frac := min(exactBits-bits.Len64(uint64(score)), boardClockBits)
	later >>= boardClockBits - frac
	return float64(score) + float64(later)/float64(uint64(1)<<frac)
}
