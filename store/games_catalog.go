package store

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eisland/isle/store/keys"
)

// A Game is a mini game Isle keeps scores for, with the bounds of a
// plausible run of it (doc/games.md, "Games", derives each from the game's
// rules): the server checks a submission against them and the session it
// was played in.
type Game struct {
	ID string
	// Move is what the client counts as one move.
	Move string
	// MovesPerSecond bounds a run's pace: n moves last at least
	// n / MovesPerSecond seconds.
	MovesPerSecond int64
	// PointsPerMove bounds a run's score: n moves make at most
	// n × PointsPerMove points (an average over the run; one move may earn
	// more, see doc/games.md).
	PointsPerMove int64
}

// games are the games of eIsland's client (doc/games.md).
var games = map[string]Game{
	"2048":   {ID: "2048", Move: "a swipe that moved a tile", MovesPerSecond: 50, PointsPerMove: 60},
	"tetris": {ID: "tetris", Move: "a piece locked", MovesPerSecond: 10, PointsPerMove: 27_830},
	"snake":  {ID: "snake", Move: "a step of the snake", MovesPerSecond: 20, PointsPerMove: 10},
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

// sessionSlack is how far a run's duration may exceed the time since its
// session started: the client's clock and the request's travel.
const sessionSlack = 5 * time.Second

// longestRun is the longest run a session allows: the session's life and
// the slack.
const longestRun = keys.GameSessionTTL + sessionSlack

// MaxScore is the most a run of g can score: the longest run a session
// allows, at g's fastest pace, each move earning g's most.
func (g Game) MaxScore() int64 {
	return g.PointsPerMove * (g.MovesPerSecond * longestRun.Milliseconds() / 1000)
}

// CheckRun says whether a run of score points, durationMs and moves fits
// the game and the session at now; the error wraps ErrScoreInvalid.
func CheckRun(sess GameSession, score, durationMs int64, moves int32, now time.Time) error {
	g, ok := LookupGame(sess.GameID)
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, sess.GameID)
	case score < 0 || durationMs < 0 || moves < 0:
		return fmt.Errorf("%w: score, duration and moves must not be negative", ErrScoreInvalid)
	case durationMs > (now.Sub(sess.StartedAt) + sessionSlack).Milliseconds(): // in ms: a Duration of durationMs could wrap
		return fmt.Errorf("%w: a run of %d ms in a session started %s ago", ErrScoreInvalid, durationMs, now.Sub(sess.StartedAt).Round(time.Second))
	case durationMs < (int64(moves)*1000+g.MovesPerSecond-1)/g.MovesPerSecond:
		return fmt.Errorf("%w: %d moves in %d ms, more than %d a second", ErrScoreInvalid, moves, durationMs, g.MovesPerSecond)
	case score > int64(moves)*g.PointsPerMove:
		return fmt.Errorf("%w: %d points in %d moves, more than %d a move", ErrScoreInvalid, score, moves, g.PointsPerMove)
	}
	return nil
}
