package game_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eisland/isle/game"
	"github.com/stretchr/testify/require"
)

func TestCheckRun(t *testing.T) {
	t.Parallel()
	now := time.Now()
	sess := game.Session{GameID: "2048", StartedAt: now.Add(-time.Minute)}
	require.NoError(t, sess.CheckRun(5000, 50_000, 300, now))
	require.NoError(t, sess.CheckRun(0, 0, 0, now), "an empty run is a run")
	for name, c := range map[string]struct {
		score, dur int64
		moves      int32
	}{
		"negative score":       {-1, 1000, 10},
		"longer than session":  {100, 120_000, 100},
		"moves too fast":       {100, 1000, 500},
		"points without moves": {100, 1000, 0},
		"too many points/move": {1 << 40, 50_000, 10},
		"negative moves":       {0, 1000, -1},
		// Read as a time.Duration these wrapped to -1 ms and 192 µs.
		"duration past int64 ns":   {0, math.MaxInt64, 0},
		"duration wrapping to 0.2": {0, 9_223_372_036_854_776, 0},
	} {
		require.ErrorIs(t, sess.CheckRun(c.score, c.dur, c.moves, now), game.ErrScoreInvalid, name)
	}
	require.ErrorIs(t, game.Session{GameID: "chess", StartedAt: sess.StartedAt}.CheckRun(1, 1, 1, now), game.ErrScoreInvalid)
}

// A session is of a game Isle knows, and lives 6 hours.
func TestNewSession(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, err := game.NewSession("s-1", "snake", 7, 42, at)
	require.NoError(t, err)
	require.Equal(t, game.Session{ID: "s-1", GameID: "snake", UserID: 7, Seed: 42, StartedAt: at, ExpiresAt: at.Add(6 * time.Hour)}, s)
	_, err = game.NewSession("s-2", "chess", 7, 42, at)
	require.ErrorIs(t, err, game.ErrScoreInvalid)
}

// gameBounds are the bounds doc/games.md derives for each game: the most
// points a move earns on average over a run, the most moves a second, and
// the most a session can score.
var gameBounds = []struct {
	game               string
	perMove, perSecond int64
	most               int64
}{
	{"2048", 60, 50, 64_815_000},
	{"tetris", 27_830, 10, 6_012_671_500},
	{"snake", 10, 20, 4_321_000},
}

// The catalog is doc/games.md's table, and each id fits its column.
func TestCatalogIsTheDocsTable(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"2048", "snake", "tetris"}, game.IDs())
	for _, c := range gameBounds {
		g, ok := game.Lookup(c.game)
		require.True(t, ok, c.game)
		require.Equal(t, c.game, g.ID)
		require.Equal(t, c.perMove, g.PointsPerMove, c.game)
		require.Equal(t, c.perSecond, g.MovesPerSecond, c.game)
		require.Equal(t, c.most, g.MaxScore(), "%s: PointsPerMove × MovesPerSecond × 21,605 s", c.game)
		require.LessOrEqual(t, len(g.ID), game.GameIDMax, c.game)
	}
	_, ok := game.Lookup("chess")
	require.False(t, ok)
}

// A score alone (a message from another producer) is refused when no run
// of its game can make it in a session: 2048's most is 64,815,000.
func TestCheckScore(t *testing.T) {
	t.Parallel()
	for _, c := range gameBounds {
		require.NoError(t, game.CheckScore(c.game, 0), c.game)
		require.NoError(t, game.CheckScore(c.game, c.most), c.game)
		require.ErrorIs(t, game.CheckScore(c.game, c.most+1), game.ErrScoreInvalid, c.game)
		require.ErrorIs(t, game.CheckScore(c.game, -1), game.ErrScoreInvalid, c.game)
	}
	require.ErrorIs(t, game.CheckScore("chess", 1), game.ErrScoreInvalid)
}

// Each game bounds a run's points by what its moves can earn and its pace
// by the moves a second it allows: a 6-hour run at the limits passes, one
// point more or one move faster does not. Today's 2048 bound let a 6-hour
// session claim about 2.8e11 points.
func TestCheckRunBoundsEachGamesPointsAndPace(t *testing.T) {
	t.Parallel()
	now := time.Now()
	dur := game.SessionTTL.Milliseconds()
	for _, c := range gameBounds {
		sess := game.Session{GameID: c.game, StartedAt: now.Add(-game.SessionTTL)}
		moves := int32(c.perSecond * dur / 1000)
		most := c.perMove * int64(moves)
		require.NoError(t, sess.CheckRun(most, dur, moves, now), "%s: the most a 6-hour run can score", c.game)
		require.ErrorIs(t, sess.CheckRun(most+1, dur, moves, now), game.ErrScoreInvalid, "%s: one point more", c.game)
		require.ErrorIs(t, sess.CheckRun(most, dur, moves+1, now), game.ErrScoreInvalid, "%s: one move faster", c.game)

		// One move: at most its points, and no faster than the pace.
		least := (1000 + c.perSecond - 1) / c.perSecond
		require.NoError(t, sess.CheckRun(c.perMove, least, 1, now), c.game)
		require.ErrorIs(t, sess.CheckRun(c.perMove, least-1, 1, now), game.ErrScoreInvalid, "%s: a move too quick", c.game)
		require.ErrorIs(t, sess.CheckRun(c.perMove+1, least, 1, now), game.ErrScoreInvalid, "%s: a move worth too much", c.game)
	}
	sess := game.Session{GameID: "2048", StartedAt: now.Add(-game.SessionTTL)}
	require.ErrorIs(t, sess.CheckRun(280_000_000_000, dur, int32(dur/20), now), game.ErrScoreInvalid, "the loose bound's 2.8e11")
}

// The 2048 bound is honest: games played by the rules (4×4, a 2 or a 4
// after each move that changed the board, a merge scoring its new tile)
// never score more than 60 points a move, nor a move more than the board
// held before it; the worst case spawns only 4s. Every prefix of every
// game passes CheckRun at the fastest pace.
func TestPlayed2048GamesStayWithinTheBound(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(2048, 60))
	now := time.Now()
	sess := game.Session{GameID: "2048", StartedAt: now.Add(-game.SessionTTL)}
	best := int64(0)
	for played := range 60 {
		fours := []float64{0.1, 1, 0}[played%3] // the usual odds, only 4s, only 2s
		var b board2048
		b.spawn(rnd, fours)
		b.spawn(rnd, fours)
		var score, moves int64
		for {
			before := b.sum()
			points, ok := b.play(rnd, played%2 == 0)
			if !ok {
				break
			}
			moves++
			score += points
			require.LessOrEqual(t, points, before, "a move earns at most the board it merges")
			require.LessOrEqual(t, score, 60*moves, "game %d after %d moves", played, moves)
			require.NoError(t, sess.CheckRun(score, moves*20, int32(moves), now), "game %d after %d moves", played, moves)
			b.spawn(rnd, fours)
		}
		best = max(best, score)
	}
	t.Logf("best of 60 games: %d points", best)
}

// board2048 is a 2048 board by the usual rules.
type board2048 [4][4]int64

func (b *board2048) sum() (s int64) {
	for _, row := range b {
		for _, v := range row {
			s += v
		}
	}
	return s
}

func (b *board2048) spawn(rnd *rand.Rand, fours float64) {
	var empty [][2]int
	for r := range 4 {
		for c := range 4 {
			if b[r][c] == 0 {
				empty = append(empty, [2]int{r, c})
			}
		}
	}
	if len(empty) == 0 {
		return
	}
	at := empty[rnd.IntN(len(empty))]
	b[at[0]][at[1]] = 2
	if rnd.Float64() < fours {
		b[at[0]][at[1]] = 4
	}
}

// play makes a move that changes the board, if there is one: greedy
// players try down, left, right, up in turn (they build in a corner and
// score more), the others a random order. It returns the move's points.
func (b *board2048) play(rnd *rand.Rand, greedy bool) (int64, bool) {
	dirs := []int{0, 1, 2, 3}
	if !greedy {
		rnd.Shuffle(len(dirs), func(i, j int) { dirs[i], dirs[j] = dirs[j], dirs[i] })
	}
	for _, d := range dirs {
		next, points := b.slide(d)
		if next != *b {
			*b = next
			return points, true
		}
	}
	return 0, false
}

// slide moves every line toward one side (0 down, 1 left, 2 right, 3 up):
// tiles slide, two equal ones meeting merge once into their sum, which
// the move scores.
func (b *board2048) slide(dir int) (board2048, int64) {
	var out board2048
	var points int64
	for i := range 4 {
		var line [4]int64
		for j := range 4 {
			line[j] = b.at(dir, i, j)
		}
		var packed []int64
		for _, v := range line {
			if v == 0 {
				continue
			}
			if n := len(packed); n > 0 && packed[n-1] == v {
				packed[n-1] = -2 * v // merged: negative, so it merges no more this move
				points += 2 * v
				continue
			}
			packed = append(packed, v)
		}
		for j := range 4 {
			var v int64
			if j < len(packed) {
				v = max(packed[j], -packed[j])
			}
			out.set(dir, i, j, v)
		}
	}
	return out, points
}

// at reads line i's j-th tile counted from the side the move goes to.
func (b *board2048) at(dir, i, j int) int64 {
	switch dir {
	case 0:
		return b[3-j][i]
	case 1:
		return b[i][j]
	case 2:
		return b[i][3-j]
	default:
		return b[j][i]
	}
}

func (b *board2048) set(dir, i, j int, v int64) {
	switch dir {
	case 0:
		b[3-j][i] = v
	case 1:
		b[i][j] = v
	case 2:
		b[i][3-j] = v
	default:
		b[j][i] = v
	}
}
